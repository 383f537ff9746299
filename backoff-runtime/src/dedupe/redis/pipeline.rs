//! The Redis inbox's claims and completions of concurrent deliveries sent
//! together, one pipeline a batch: whatever waits when a pipeline is sent
//! goes into the next one (at most [`IN_FLIGHT`] unanswered at once), and
//! one task renews the lease of every claim held, instead of a task a claim.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Pipeline, Value};
use tokio::sync::{mpsc, oneshot};

use crate::dedupe::batches::run;
use crate::dedupe::lock;

/// The most pipelines sent and not yet answered.
const IN_FLIGHT: usize = 4;
/// The value of a completed key.
pub(crate) const DONE: &str = "done";
/// Extends the lease when the key still holds this claim.
const RENEW: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";

/// What a claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The key is this claim's now.
    Claimed,
    /// The key completed within its window.
    Duplicate,
    /// Another claim holds the key (or it went in between).
    InProgress,
}

enum Op {
    /// `SET key token NX PX lease`, then `GET key`: the claim is this one's
    /// when the key holds its token.
    Claim {
        key: String,
        token: String,
        reply: oneshot::Sender<Result<Found, String>>,
    },
    /// `SET key done PX window`.
    Complete {
        key: String,
        window_ms: u64,
        reply: oneshot::Sender<Result<(), String>>,
    },
}

/// The claims held now, by key: their token.
type Held = Mutex<HashMap<String, String>>;

/// Sends the claims and completions of concurrent deliveries to Redis
/// together, and renews the claims held.
pub(crate) struct Pipeliner {
    ops: mpsc::UnboundedSender<Op>,
    held: Arc<Held>,
    lease_ms: Arc<AtomicU64>,
}

impl Pipeliner {
    /// Starts the tasks that send batches and renew leases, on the
    /// current tokio runtime; they end when the pipeliner is dropped.
    pub(crate) fn start(manager: ConnectionManager, lease: Duration) -> Self {
        let (ops, receiver) = mpsc::unbounded_channel();
        let held: Arc<Held> = Arc::default();
        let lease_ms = Arc::new(AtomicU64::new(millis(lease)));
        tokio::spawn(run(receiver, IN_FLIGHT, {
            let (manager, lease_ms) = (manager.clone(), Arc::clone(&lease_ms));
            move |batch| {
                let mut conn = manager.clone();
                let lease = lease_ms.load(Ordering::Relaxed);
                async move { send(&mut conn, batch, lease).await }
            }
        }));
        tokio::spawn(renew(manager, Arc::downgrade(&held), Arc::clone(&lease_ms)));
        Pipeliner {
            ops,
            held,
            lease_ms,
        }
    }

    /// Claims from now on last `lease` unless renewed.
    pub(crate) fn set_lease(&self, lease: Duration) {
        self.lease_ms.store(millis(lease), Ordering::Relaxed);
    }

    /// Claims `key` with `token`; a claimed key is renewed until
    /// [`settled`](Self::settled).
    pub(crate) async fn claim(&self, key: &str, token: &str) -> Result<Found, String> {
        let (reply, answer) = oneshot::channel();
        self.send(Op::Claim {
            key: key.to_owned(),
            token: token.to_owned(),
            reply,
        })?;
        let found = answer.await.map_err(|_| gone())??;
        if found == Found::Claimed {
            lock(&self.held).insert(key.to_owned(), token.to_owned());
        }
        Ok(found)
    }

    /// The claim of `key` is no longer renewed (completed, released or
    /// abandoned).
    pub(crate) fn settled(&self, key: &str) {
        lock(&self.held).remove(key);
    }

    /// Marks `key` done for `window`.
    pub(crate) fn complete(
        &self,
        key: &str,
        window: Duration,
    ) -> impl Future<Output = Result<(), String>> + use<> {
        self.settled(key);
        let (reply, answer) = oneshot::channel();
        let sent = self.send(Op::Complete {
            key: key.to_owned(),
            window_ms: millis(window),
            reply,
        });
        async move {
            sent?;
            answer.await.map_err(|_| gone())?
        }
    }

    fn send(&self, op: Op) -> Result<(), String> {
        self.ops.send(op).map_err(|_| gone())
    }
}

fn gone() -> String {
    "the store is shutting down".to_owned()
}

/// Milliseconds, at least one (`PX 0` is an error).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Sends one batch as one pipeline and answers each of its operations.
async fn send(conn: &mut ConnectionManager, batch: Vec<Op>, lease_ms: u64) {
    let mut pipe = Pipeline::with_capacity(batch.len() * 2);
    for op in &batch {
        match op {
            Op::Claim { key, token, .. } => {
                pipe.cmd("SET")
                    .arg(key)
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(lease_ms)
                    .ignore()
                    .cmd("GET")
                    .arg(key);
            }
            Op::Complete { key, window_ms, .. } => {
                pipe.cmd("SET").arg(key).arg(DONE).arg("PX").arg(window_ms);
            }
        }
    }
    let replies: Result<Vec<Value>, _> = pipe.query_async(conn).await;
    let replies = match replies {
        Ok(replies) if replies.len() == batch.len() => replies,
        Ok(replies) => {
            let e = format!("{} replies to {} commands", replies.len(), batch.len());
            return fail(batch, &e);
        }
        Err(e) => return fail(batch, &e.to_string()),
    };
    for (op, value) in batch.into_iter().zip(replies) {
        match op {
            Op::Claim { token, reply, .. } => {
                let held: Result<Option<String>, _> = redis::from_redis_value(value);
                let _ = reply.send(match held {
                    Ok(Some(held)) if held == token => Ok(Found::Claimed),
                    Ok(Some(held)) if held == DONE => Ok(Found::Duplicate),
                    // Held by another claim, or gone since (released,
                    // expired): the requeued delivery tries again.
                    Ok(_) => Ok(Found::InProgress),
                    Err(e) => Err(e.to_string()),
                });
            }
            Op::Complete { reply, .. } => {
                let done: Result<(), _> = redis::from_redis_value(value);
                let _ = reply.send(done.map_err(|e| e.to_string()));
            }
        }
    }
}

fn fail(batch: Vec<Op>, reason: &str) {
    for op in batch {
        match op {
            Op::Claim { reply, .. } => {
                let _ = reply.send(Err(reason.to_owned()));
            }
            Op::Complete { reply, .. } => {
                let _ = reply.send(Err(reason.to_owned()));
            }
        }
    }
}

/// Extends the lease of every claim held now, every third of the lease,
/// until the pipeliner is gone.
async fn renew(manager: ConnectionManager, held: Weak<Held>, lease_ms: Arc<AtomicU64>) {
    let mut conn = manager;
    loop {
        let lease = lease_ms.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(lease / 3)).await;
        let Some(held) = held.upgrade() else {
            return;
        };
        let claims: Vec<(String, String)> = lock(&held)
            .iter()
            .map(|(key, token)| (key.clone(), token.clone()))
            .collect();
        if claims.is_empty() {
            continue;
        }
        let mut pipe = Pipeline::with_capacity(claims.len());
        for (key, token) in &claims {
            pipe.cmd("EVAL")
                .arg(RENEW)
                .arg(1)
                .arg(key)
                .arg(token)
                .arg(lease);
        }
        let renewed: Result<Vec<i64>, _> = pipe.query_async(&mut conn).await;
        match renewed {
            Ok(renewed) => {
                let mut held = lock(&held);
                for ((key, token), done) in claims.iter().zip(renewed) {
                    // Settled while the renewal was on its way: not a lapse.
                    if done == 0 && held.get(key) == Some(token) {
                        held.remove(key);
                        tracing::warn!("the claim of {key} lapsed while its handler ran");
                    }
                }
            }
            Err(e) => tracing::warn!("renewing {} claims: {e}", claims.len()),
        }
    }
}
