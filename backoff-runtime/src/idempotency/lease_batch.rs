//! Claims of PostgreSQL keys whose handler does not write in the store's
//! transaction: a row with a lease instead of a transaction held through the
//! handler, and the claims, completions and releases of concurrent
//! deliveries sent together, one statement for a whole batch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::idempotency::StoreError;
use crate::idempotency::store::{Claim, Completed, HeldKey};

/// How long a claim lasts unless renewed: the longest a key stays blocked
/// after its process died.
pub(crate) const LEASE: Duration = Duration::from_secs(15);
/// The most operations one statement carries.
const BATCH: usize = 500;
/// The most batches sent and not yet answered.
const IN_FLIGHT: usize = 8;

/// A key of one consumer.
type Id = (String, String);

enum Op {
    Claim(Id, String, oneshot::Sender<Result<Answer, String>>),
    Complete(Id, f64, oneshot::Sender<Result<(), String>>),
    Release(Id, String, oneshot::Sender<Result<(), String>>),
}

/// What a batched claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Claimed,
    Duplicate,
    InProgress,
}

/// Sends the operations of concurrent deliveries to PostgreSQL together:
/// whatever is waiting when a statement returns goes in the next one.
pub(crate) struct Batcher {
    ops: mpsc::UnboundedSender<Op>,
    /// The claims held now, renewed every third of the lease.
    held: Arc<Mutex<HashMap<String, Id>>>,
    address: Arc<str>,
}

impl Batcher {
    pub(crate) fn start(pool: PgPool, address: Arc<str>) -> Arc<Self> {
        let (ops, receiver) = mpsc::unbounded_channel();
        let held: Arc<Mutex<HashMap<String, Id>>> = Arc::default();
        // Claims and releases need not wait for the disk: one lost in a
        // server crash is a key free again, as after its lease. Completions
        // do: they commit before the delivery's ack.
        let options = (*pool.connect_options())
            .clone()
            .options([("synchronous_commit", "off")]);
        let claims = PgPoolOptions::new()
            .max_connections(IN_FLIGHT as u32 + 1)
            .acquire_timeout(Duration::from_secs(5))
            .test_before_acquire(false)
            .connect_lazy_with(options);
        tokio::spawn(run(pool, claims.clone(), receiver));
        tokio::spawn(renew(claims, Arc::downgrade(&held)));
        Arc::new(Batcher { ops, held, address })
    }

    fn failed(&self, action: &'static str, reason: String) -> StoreError {
        StoreError::Unavailable {
            store: self.address.to_string(),
            action,
            reason,
        }
    }

    pub(crate) async fn claim(
        self: &Arc<Self>,
        consumer: &str,
        key: &str,
        window: Duration,
    ) -> Result<Claim, StoreError> {
        let id = (consumer.to_owned(), key.to_owned());
        let token = uuid::Uuid::new_v4().to_string();
        let (reply, answer) = oneshot::channel();
        let gone = || self.failed("claiming a key", "the store is shutting down".into());
        self.ops
            .send(Op::Claim(id.clone(), token.clone(), reply))
            .map_err(|_| gone())?;
        let answer = answer
            .await
            .map_err(|_| gone())?
            .map_err(|e| self.failed("claiming a key", e))?;
        Ok(match answer {
            Answer::Duplicate => Claim::Duplicate,
            Answer::InProgress => Claim::InProgress,
            Answer::Claimed => {
                lock(&self.held).insert(token.clone(), id.clone());
                Claim::Claimed(Box::new(LeaseHeld {
                    batcher: Arc::clone(self),
                    id,
                    token,
                    window,
                    settled: false,
                }))
            }
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A claim made by the batcher.
struct LeaseHeld {
    batcher: Arc<Batcher>,
    id: Id,
    token: String,
    window: Duration,
    settled: bool,
}

impl LeaseHeld {
    fn settle(&mut self, op: Op) -> Result<(), ()> {
        self.settled = true;
        lock(&self.batcher.held).remove(&self.token);
        self.batcher.ops.send(op).map_err(|_| ())
    }

    fn done(mut self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        let (reply, answer) = oneshot::channel();
        let sent = self.settle(Op::Complete(
            self.id.clone(),
            self.window.as_secs_f64(),
            reply,
        ));
        Box::pin(async move {
            let fail = |e: String| self.batcher.failed("completing a key", e);
            sent.map_err(|()| fail("the store is shutting down".into()))?;
            answer
                .await
                .map_err(|_| fail("the store is shutting down".into()))?
                .map_err(fail)
        })
    }
}

impl HeldKey for LeaseHeld {
    fn complete(self: Box<Self>) -> BoxFuture<'static, Result<Completed, StoreError>> {
        let done = self.done();
        Box::pin(async move { done.await.map(|()| Completed::default()) })
    }

    fn complete_failed(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        self.done()
    }

    fn release(mut self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        let (reply, answer) = oneshot::channel();
        let sent = self.settle(Op::Release(self.id.clone(), self.token.clone(), reply));
        Box::pin(async move {
            let fail = |e: String| self.batcher.failed("releasing a key", e);
            sent.map_err(|()| fail("the store is shutting down".into()))?;
            answer
                .await
                .map_err(|_| fail("the store is shutting down".into()))?
                .map_err(fail)
        })
    }
}

impl Drop for LeaseHeld {
    fn drop(&mut self) {
        if !self.settled {
            // Abandoned (a shutdown past its grace): freed now, not when
            // its lease runs out.
            let (reply, _) = oneshot::channel();
            let _ = self.settle(Op::Release(self.id.clone(), self.token.clone(), reply));
        }
    }
}

/// Takes what waits and sends it as one statement a kind, without waiting
/// for the statements before it to return (at most [`IN_FLIGHT`] at once):
/// the more deliveries wait, the larger the next batch.
async fn run(pool: PgPool, claims_pool: PgPool, mut receiver: mpsc::UnboundedReceiver<Op>) {
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut ops = Vec::new();
    while receiver.recv_many(&mut ops, BATCH).await > 0 {
        let mut claims = Vec::new();
        let mut completes = Vec::new();
        let mut releases = Vec::new();
        for op in ops.drain(..) {
            match op {
                Op::Claim(id, token, reply) => claims.push((id, token, reply)),
                Op::Complete(id, window, reply) => completes.push((id, window, reply)),
                Op::Release(id, token, reply) => releases.push((id, token, reply)),
            }
        }
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        let (pool, claims_pool) = (pool.clone(), claims_pool.clone());
        tokio::spawn(async move {
            tokio::join!(
                claim(&claims_pool, claims),
                complete(&pool, completes),
                release(&claims_pool, releases)
            );
            drop(permit);
        });
    }
}

/// The keys of a batch in one order, so that two batches never wait for
/// each other's rows in opposite orders.
fn columns<'a>(ids: impl Iterator<Item = &'a Id>) -> (Vec<String>, Vec<String>) {
    ids.map(|(c, k)| (c.clone(), k.clone())).unzip()
}

type ClaimOp = (Id, String, oneshot::Sender<Result<Answer, String>>);

/// Per key of a claim batch: consumer, key, claimed now, completed (NULL:
/// its row was not visible).
type AnswerRow = (String, String, bool, Option<bool>);

async fn claim(pool: &PgPool, mut claims: Vec<ClaimOp>) {
    if claims.is_empty() {
        return;
    }
    claims.sort_by(|a, b| a.0.cmp(&b.0));
    // The same key twice in one batch: the second waits for the first.
    let mut batch: Vec<ClaimOp> = Vec::with_capacity(claims.len());
    for claim in claims {
        if batch.last().is_some_and(|last| last.0 == claim.0) {
            let _ = claim.2.send(Ok(Answer::InProgress));
        } else {
            batch.push(claim);
        }
    }
    let (consumers, keys) = columns(batch.iter().map(|c| &c.0));
    let tokens: Vec<&str> = batch.iter().map(|c| c.1.as_str()).collect();
    // A claimed key holds its token and the lease's end; a completed one no
    // token and the window's end. The outer query sees the rows as they
    // were before the insert: a row it cannot see is one committed a moment
    // ago, answered as in progress (the delivery comes back).
    let answers: Result<Vec<AnswerRow>, sqlx::Error> = sqlx::query_as(
        "WITH input AS (
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) AS t(consumer, key, token)
        ), claimed AS (
            INSERT INTO rabbit_backoff_inbox AS inbox (consumer, key, expires_at, token)
            SELECT consumer, key, now() + make_interval(secs => $4), token FROM input
            ON CONFLICT (consumer, key) DO UPDATE
                SET expires_at = EXCLUDED.expires_at, token = EXCLUDED.token
                WHERE inbox.expires_at <= now()
            RETURNING inbox.consumer, inbox.key
        )
        SELECT i.consumer, i.key, c.key IS NOT NULL,
            CASE WHEN e.key IS NULL THEN NULL ELSE e.token IS NULL AND e.expires_at > now() END
        FROM input i
        LEFT JOIN claimed c ON c.consumer = i.consumer AND c.key = i.key
        LEFT JOIN rabbit_backoff_inbox e ON e.consumer = i.consumer AND e.key = i.key",
    )
    .bind(&consumers)
    .bind(&keys)
    .bind(&tokens)
    .bind(LEASE.as_secs_f64())
    .fetch_all(pool)
    .await;
    match answers {
        Ok(rows) => {
            let found: HashMap<Id, Answer> = rows
                .into_iter()
                .map(|(c, k, claimed, done)| {
                    let answer = match (claimed, done) {
                        (true, _) => Answer::Claimed,
                        (false, Some(true)) => Answer::Duplicate,
                        _ => Answer::InProgress,
                    };
                    ((c, k), answer)
                })
                .collect();
            for (id, _, reply) in batch {
                let answer = found.get(&id).copied().unwrap_or(Answer::InProgress);
                let _ = reply.send(Ok(answer));
            }
        }
        Err(e) => {
            for (_, _, reply) in batch {
                let _ = reply.send(Err(e.to_string()));
            }
        }
    }
}

type CompleteOp = (Id, f64, oneshot::Sender<Result<(), String>>);

async fn complete(pool: &PgPool, mut completes: Vec<CompleteOp>) {
    if completes.is_empty() {
        return;
    }
    completes.sort_by(|a, b| a.0.cmp(&b.0));
    completes.dedup_by(|a, b| a.0 == b.0);
    let (consumers, keys) = columns(completes.iter().map(|c| &c.0));
    let windows: Vec<f64> = completes.iter().map(|c| c.1).collect();
    let done = sqlx::query(
        "INSERT INTO rabbit_backoff_inbox AS inbox (consumer, key, expires_at, token)
        SELECT consumer, key, now() + make_interval(secs => w), NULL
        FROM unnest($1::text[], $2::text[], $3::float8[]) AS t(consumer, key, w)
        ON CONFLICT (consumer, key) DO UPDATE
            SET expires_at = EXCLUDED.expires_at, token = NULL",
    )
    .bind(&consumers)
    .bind(&keys)
    .bind(&windows)
    .execute(pool)
    .await
    .map(|_| ())
    .map_err(|e| e.to_string());
    for (_, _, reply) in completes {
        let _ = reply.send(done.clone());
    }
}

type ReleaseOp = (Id, String, oneshot::Sender<Result<(), String>>);

async fn release(pool: &PgPool, mut releases: Vec<ReleaseOp>) {
    if releases.is_empty() {
        return;
    }
    releases.sort_by(|a, b| a.0.cmp(&b.0));
    let (consumers, keys) = columns(releases.iter().map(|c| &c.0));
    let tokens: Vec<&str> = releases.iter().map(|c| c.1.as_str()).collect();
    let done = sqlx::query(
        "DELETE FROM rabbit_backoff_inbox AS inbox
        USING unnest($1::text[], $2::text[], $3::text[]) AS t(consumer, key, token)
        WHERE inbox.consumer = t.consumer AND inbox.key = t.key AND inbox.token = t.token",
    )
    .bind(&consumers)
    .bind(&keys)
    .bind(&tokens)
    .execute(pool)
    .await
    .map(|_| ())
    .map_err(|e| e.to_string());
    for (_, _, reply) in releases {
        let _ = reply.send(done.clone());
    }
}

/// Extends the lease of every claim held now, every third of the lease,
/// until the batcher is gone.
async fn renew(pool: PgPool, held: std::sync::Weak<Mutex<HashMap<String, Id>>>) {
    loop {
        tokio::time::sleep(LEASE / 3).await;
        let Some(held) = held.upgrade() else {
            return;
        };
        let mut claims: Vec<(Id, String)> = lock(&held)
            .iter()
            .map(|(token, id)| (id.clone(), token.clone()))
            .collect();
        drop(held);
        if claims.is_empty() {
            continue;
        }
        claims.sort();
        let (consumers, keys) = columns(claims.iter().map(|c| &c.0));
        let tokens: Vec<&str> = claims.iter().map(|c| c.1.as_str()).collect();
        let renewed = sqlx::query(
            "UPDATE rabbit_backoff_inbox AS inbox SET expires_at = now() + make_interval(secs => $4)
            FROM unnest($1::text[], $2::text[], $3::text[]) AS t(consumer, key, token)
            WHERE inbox.consumer = t.consumer AND inbox.key = t.key AND inbox.token = t.token",
        )
        .bind(&consumers)
        .bind(&keys)
        .bind(&tokens)
        .bind(LEASE.as_secs_f64())
        .execute(&pool)
        .await;
        if let Err(e) = renewed {
            tracing::warn!("renewing {} claims: {e}", claims.len());
        }
    }
}
