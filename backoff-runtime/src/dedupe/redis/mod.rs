//! The inbox on Redis: a claim is a key set with `NX` and a lease that is
//! renewed while the handler runs; a completed key holds `done` until the
//! window expires it (Redis' own TTL: nothing to clean up). Claims and
//! completions of concurrent deliveries go out together, one pipeline a
//! batch (`pipeline.rs`).

pub(crate) mod pipeline;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};

use crate::dedupe::StoreError;
use crate::dedupe::plain_held::{Plain, PlainHeld};
use crate::dedupe::redis::pipeline::{Found, Pipeliner};
use crate::dedupe::store::{Claim, ClaimRequest, DedupeStore};
use crate::transport::net::redact::redact;

/// How long a claim lasts unless its holder renews it: the longest a key
/// stays blocked after its process died.
const DEFAULT_LEASE: Duration = Duration::from_secs(15);
/// How long one command may take before the store counts as unavailable.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Deletes the key when it still holds this claim.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

/// An inbox on Redis (feature `redis`).
///
/// Each key is `rabbit-backoff:inbox:<consumer>:<key>`. A claim sets it
/// with `NX` and a lease (15 s by default, renewed every third of it while
/// the handler runs), completing sets it to `done` for the window, a
/// transient failure deletes it. The connection is a
/// [`ConnectionManager`], which reconnects by itself; the claims and
/// completions of concurrent deliveries are sent together, one pipeline a
/// batch, and one task renews every claim held. Those tasks run on the
/// tokio runtime `connect` was called on: connect on the runtime that runs
/// the consumers.
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
    pipeliner: Arc<Pipeliner>,
    address: Arc<str>,
    prefix: Arc<str>,
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
            pipeliner: Arc::new(Pipeliner::start(manager.clone(), DEFAULT_LEASE)),
            manager,
            address: Arc::from(address),
            prefix: Arc::from("rabbit-backoff:inbox:"),
        })
    }

    /// How long a claim lasts unless renewed (default 15 s): after a
    /// process dies, its keys stay blocked this long, and their messages
    /// are requeued meanwhile.
    pub fn with_lease(self, lease: Duration) -> Self {
        self.pipeliner
            .set_lease(lease.max(Duration::from_millis(300)));
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

    fn failed<E: ToString>(&self, action: &'static str) -> impl Fn(E) -> StoreError + '_ {
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
            let found = self
                .pipeliner
                .claim(&key, &token)
                .await
                .map_err(self.failed("claiming a key"))?;
            Ok(match found {
                Found::Duplicate => Claim::Duplicate,
                Found::InProgress => Claim::InProgress,
                Found::Claimed => Claim::Claimed(Box::new(Plain(RedisHeld {
                    store: self.clone(),
                    key,
                    token,
                    window: request.window,
                    settled: false,
                }))),
            })
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

struct RedisHeld {
    store: RedisStore,
    key: String,
    token: String,
    window: Duration,
    settled: bool,
}

impl PlainHeld for RedisHeld {
    fn done(mut self) -> BoxFuture<'static, Result<(), StoreError>> {
        self.settled = true;
        let done = self.store.pipeliner.complete(&self.key, self.window);
        Box::pin(async move { done.await.map_err(self.store.failed("completing a key")) })
    }

    fn free(mut self) -> BoxFuture<'static, Result<(), StoreError>> {
        self.settled = true;
        self.store.pipeliner.settled(&self.key);
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
        if self.settled {
            return;
        }
        self.store.pipeliner.settled(&self.key);
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
