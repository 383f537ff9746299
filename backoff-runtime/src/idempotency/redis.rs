//! The inbox on Redis: a claim is a key set with `NX` and a lease that its
//! holder renews while the handler runs; a completed key holds `done` until
//! the window expires it (Redis' own TTL: nothing to clean up).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};
use tokio::task::AbortHandle;

use crate::idempotency::StoreError;
use crate::idempotency::store::{Claim, ClaimRequest, Completed, DedupeStore, HeldKey};
use crate::transport::error::redact;

/// How long a claim lasts unless its holder renews it: the longest a key
/// stays blocked after its process died.
const DEFAULT_LEASE: Duration = Duration::from_secs(15);
/// The value of a completed key.
const DONE: &str = "done";
/// How long one command may take before the store counts as unavailable.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Deletes the key when it still holds this claim.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

/// Extends the lease when the key still holds this claim.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
    )
});

/// An inbox on Redis (feature `redis`).
///
/// Each key is `rabbit-backoff:inbox:<consumer>:<key>`. A claim sets it
/// with `NX` and a lease (15 s by default, renewed every third of it while
/// the handler runs), completing sets it to `done` for the window, a
/// transient failure deletes it. The connection is a
/// [`ConnectionManager`], which reconnects by itself and pipelines the
/// commands of concurrent deliveries on one connection.
///
/// ```no_run
/// # async fn demo() -> Result<(), rabbit_backoff::dedupe::StoreError> {
/// use rabbit_backoff::dedupe::RedisStore;
///
/// let store = RedisStore::connect("redis://127.0.0.1:6379").await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    manager: ConnectionManager,
    address: Arc<str>,
    prefix: Arc<str>,
    lease: Duration,
}

impl RedisStore {
    /// A store at `url` (`redis://host:port/db`, `rediss://` needs the
    /// redis crate's TLS features). Only a malformed address is an error:
    /// the connection is made on first use and made again after a loss, so
    /// that a service starts while Redis is down (the runtime waits for it
    /// before consuming, and says so in its health).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let address = redact(url);
        let client = Client::open(url).map_err(|e| StoreError::Address {
            address: address.clone(),
            reason: e.to_string(),
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(RESPONSE_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let manager = ConnectionManager::new_lazy_with_config(client, config).map_err(|e| {
            StoreError::Address {
                address: address.clone(),
                reason: e.to_string(),
            }
        })?;
        Ok(RedisStore {
            manager,
            address: Arc::from(address),
            prefix: Arc::from("rabbit-backoff:inbox:"),
            lease: DEFAULT_LEASE,
        })
    }

    /// How long a claim lasts unless renewed (default 15 s): after a
    /// process dies, its keys stay blocked this long, and their messages
    /// are requeued meanwhile.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(300));
        self
    }

    /// The prefix of every key (default `rabbit-backoff:inbox:`).
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = Arc::from(prefix);
        self
    }

    fn key(&self, consumer: &str, key: &str) -> String {
        // The consumer's length keeps `a:b` + `c` apart from `a` + `b:c`.
        format!("{}{}:{consumer}:{key}", self.prefix, consumer.len())
    }

    fn failed(&self, action: &'static str) -> impl Fn(redis::RedisError) -> StoreError + '_ {
        move |e| StoreError::Unavailable {
            store: self.address.to_string(),
            action,
            reason: e.to_string(),
        }
    }
}

impl DedupeStore for RedisStore {
    fn claim<'a>(&'a self, request: ClaimRequest<'a>) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            let key = self.key(request.consumer, request.key);
            let token = format!("claim:{}", uuid::Uuid::new_v4());
            let mut conn = self.manager.clone();
            let set: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(millis(self.lease))
                .query_async(&mut conn)
                .await
                .map_err(self.failed("claiming a key"))?;
            if set.is_none() {
                let held: Option<String> = redis::cmd("GET")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .map_err(self.failed("reading a claimed key"))?;
                // Gone since (released, expired): let the requeued delivery try again.
                return Ok(match held.as_deref() {
                    Some(DONE) => Claim::Duplicate,
                    _ => Claim::InProgress,
                });
            }
            let renewal = tokio::spawn(renew(
                self.manager.clone(),
                key.clone(),
                token.clone(),
                self.lease,
            ))
            .abort_handle();
            Ok(Claim::Claimed(Box::new(RedisHeld {
                store: self.clone(),
                key,
                token,
                window: request.window,
                renewal,
                settled: false,
            })))
        })
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut conn = self.manager.clone();
            let _: String = redis::cmd("PING")
                .query_async(&mut conn)
                .await
                .map_err(self.failed("a ping"))?;
            Ok(())
        })
    }

    fn describe(&self) -> String {
        self.address.to_string()
    }
}

/// Renews the lease every third of it, for as long as the claim is held.
async fn renew(manager: ConnectionManager, key: String, token: String, lease: Duration) {
    let mut conn = manager;
    loop {
        tokio::time::sleep(lease / 3).await;
        let renewed: Result<i64, _> = RENEW
            .key(&key)
            .arg(&token)
            .arg(millis(lease))
            .invoke_async(&mut conn)
            .await;
        match renewed {
            Ok(1) => {}
            Ok(_) => {
                tracing::warn!("the claim of {key} lapsed while its handler ran");
                return;
            }
            Err(e) => tracing::warn!("renewing the claim of {key}: {e}"),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

struct RedisHeld {
    store: RedisStore,
    key: String,
    token: String,
    window: Duration,
    renewal: AbortHandle,
    settled: bool,
}

impl RedisHeld {
    fn done(mut self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        self.settled = true;
        self.renewal.abort();
        Box::pin(async move {
            let mut conn = self.store.manager.clone();
            let _: () = redis::cmd("SET")
                .arg(&self.key)
                .arg(DONE)
                .arg("PX")
                .arg(millis(self.window))
                .query_async(&mut conn)
                .await
                .map_err(self.store.failed("completing a key"))?;
            Ok(())
        })
    }
}

impl HeldKey for RedisHeld {
    fn complete(self: Box<Self>) -> BoxFuture<'static, Result<Completed, StoreError>> {
        let done = self.done();
        Box::pin(async move { done.await.map(|()| Completed::default()) })
    }

    fn complete_failed(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        self.done()
    }

    fn release(mut self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        self.settled = true;
        self.renewal.abort();
        Box::pin(async move {
            let mut conn = self.store.manager.clone();
            let _: i64 = RELEASE
                .key(&self.key)
                .arg(&self.token)
                .invoke_async(&mut conn)
                .await
                .map_err(self.store.failed("releasing a key"))?;
            Ok(())
        })
    }
}

impl Drop for RedisHeld {
    fn drop(&mut self) {
        self.renewal.abort();
        if self.settled {
            return;
        }
        // Abandoned (a shutdown past its grace): free the key now rather
        // than when the lease runs out, when a runtime is still there.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let mut conn = self.store.manager.clone();
            let (key, token) = (
                std::mem::take(&mut self.key),
                std::mem::take(&mut self.token),
            );
            runtime.spawn(async move {
                let _: Result<i64, _> = RELEASE.key(&key).arg(&token).invoke_async(&mut conn).await;
            });
        }
    }
}
