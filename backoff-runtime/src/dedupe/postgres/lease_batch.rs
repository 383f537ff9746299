//! Claims of PostgreSQL keys whose handler does not write in the store's
//! transaction: a row with a lease instead of a transaction held through the
//! handler, and the claims, completions and releases of concurrent
//! deliveries sent together, one statement for a whole batch.
//!
//! Every statement is an `INSERT … ON CONFLICT` over the batch's keys, which
//! finds each key's row through the primary key whatever the table's
//! statistics say. A join of the batch with the table leaves the choice to
//! the planner, and a table never analyzed (autovacuum off, or a table
//! created a moment ago) looked empty to it: it scanned the whole table
//! for every batch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use sqlx::postgres::PgArguments;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};

use crate::dedupe::batches::run;
use crate::dedupe::plain_held::{Plain, PlainHeld};
use crate::dedupe::store::Claim;
use crate::dedupe::{StoreError, lock};

/// How long a claim lasts unless renewed: the longest a key stays blocked
/// after its process died.
pub(crate) const LEASE: Duration = Duration::from_secs(15);
/// The window's end a claim writes, as a multiple of the window: a
/// completion within a hundredth of the window after its claim keeps it, so
/// that a key is remembered for at least its window after its completion,
/// and at most a hundredth longer.
macro_rules! window_slack {
    () => {
        "1.01"
    };
}

/// The most batches of claims and releases sent and not yet answered.
const IN_FLIGHT: usize = 4;
/// The most batches of completions sent and not yet answered. Each waits
/// for the disk (a commit's flush costs the server more than the batch's
/// rows), so fewer in flight means larger batches and fewer flushes: the
/// completions that finish during one flush share the next.
const COMPLETIONS_IN_FLIGHT: usize = 2;

/// A key of one consumer.
type Id = (String, String);

/// A claim or a release: statements that need not wait for the disk.
enum Op {
    Claim(ClaimOp),
    Release(ReleaseOp),
}

/// A claim: its key, its token, its key's window in seconds, and where the
/// answer goes.
type ClaimOp = (Id, String, f64, oneshot::Sender<Result<Answer, String>>);
type CompleteOp = (Id, f64, oneshot::Sender<Result<(), String>>);
type ReleaseOp = (Id, String, oneshot::Sender<Result<(), String>>);

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
    completions: mpsc::UnboundedSender<CompleteOp>,
    /// The claims held now, renewed every third of the lease.
    held: Arc<Mutex<HashMap<String, Id>>>,
    address: Arc<str>,
}

impl Batcher {
    pub(crate) fn start(pool: PgPool, address: Arc<str>) -> Arc<Self> {
        let (ops, receiver) = mpsc::unbounded_channel();
        let (completions, completed) = mpsc::unbounded_channel();
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
        tokio::spawn(run(receiver, IN_FLIGHT, {
            let claims = claims.clone();
            move |ops| claim_and_release(claims.clone(), ops)
        }));
        tokio::spawn(run(completed, COMPLETIONS_IN_FLIGHT, move |ops| {
            complete(pool.clone(), ops)
        }));
        tokio::spawn(renew(claims, Arc::downgrade(&held)));
        Arc::new(Batcher {
            ops,
            completions,
            held,
            address,
        })
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
            .send(Op::Claim((
                id.clone(),
                token.clone(),
                window.as_secs_f64(),
                reply,
            )))
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
                Claim::Claimed(Box::new(Plain(LeaseHeld {
                    batcher: Arc::clone(self),
                    id,
                    token,
                    window,
                    settled: false,
                })))
            }
        })
    }
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
    /// No longer renewed: it is completed or released.
    fn settle(&mut self) {
        self.settled = true;
        lock(&self.batcher.held).remove(&self.token);
    }

    fn release_op(&mut self, reply: oneshot::Sender<Result<(), String>>) -> Result<(), ()> {
        self.settle();
        let op = Op::Release((self.id.clone(), self.token.clone(), reply));
        self.batcher.ops.send(op).map_err(|_| ())
    }

    /// The batcher's answer to the operation sent (`sent`) for this key:
    /// an error names `what` was done.
    fn answered(
        self,
        what: &'static str,
        sent: Result<(), ()>,
        answer: oneshot::Receiver<Result<(), String>>,
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        Box::pin(async move {
            let fail = |e: String| self.batcher.failed(what, e);
            sent.map_err(|()| fail("the store is shutting down".into()))?;
            answer
                .await
                .map_err(|_| fail("the store is shutting down".into()))?
                .map_err(fail)
        })
    }
}

impl PlainHeld for LeaseHeld {
    fn done(mut self) -> BoxFuture<'static, Result<(), StoreError>> {
        let (reply, answer) = oneshot::channel();
        self.settle();
        let op = (self.id.clone(), self.window.as_secs_f64(), reply);
        let sent = self.batcher.completions.send(op).map_err(|_| ());
        self.answered("completing a key", sent, answer)
    }

    fn free(mut self) -> BoxFuture<'static, Result<(), StoreError>> {
        let (reply, answer) = oneshot::channel();
        let sent = self.release_op(reply);
        self.answered("releasing a key", sent, answer)
    }
}

impl Drop for LeaseHeld {
    fn drop(&mut self) {
        if !self.settled {
            // Abandoned (a shutdown past its grace): freed now, not when
            // its lease runs out.
            let (reply, _) = oneshot::channel();
            let _ = self.release_op(reply);
        }
    }
}

/// The claims and the releases of a batch, one statement each, at once.
async fn claim_and_release(pool: PgPool, ops: Vec<Op>) {
    let mut claims = Vec::new();
    let mut releases = Vec::new();
    for op in ops {
        match op {
            Op::Claim(op) => claims.push(op),
            Op::Release(op) => releases.push(op),
        }
    }
    tokio::join!(claim(&pool, claims), release(&pool, releases));
}

/// The keys of a batch in one order, so that two batches never wait for
/// each other's rows in opposite orders.
fn columns<'a>(ids: impl Iterator<Item = &'a Id>) -> (Vec<String>, Vec<String>) {
    ids.map(|(c, k)| (c.clone(), k.clone())).unzip()
}

/// An update of the inbox rows of claims, each only while its token is
/// still the claim's: `set` says what it sets. A row that is gone is
/// inserted free (expired), as a lapsed claim leaves it.
macro_rules! where_still_ours {
    ($set:literal) => {
        concat!(
            "INSERT INTO rabbit_backoff_inbox AS inbox (consumer, key, expires_at, token)
            SELECT consumer, key, '-infinity', token
            FROM unnest($1::text[], $2::text[], $3::text[]) AS t(consumer, key, token)
            ON CONFLICT (consumer, key) DO UPDATE ",
            $set,
            " WHERE inbox.token = EXCLUDED.token"
        )
    };
}

/// `statement` (from [`where_still_ours!`]) over these claims (key and
/// token), bound as its first three parameters.
fn still_ours<'a>(
    statement: &'static str,
    claims: impl Iterator<Item = (&'a Id, &'a String)>,
) -> sqlx::query::Query<'static, Postgres, PgArguments> {
    let (ids, tokens): (Vec<&Id>, Vec<String>) = claims.map(|(id, t)| (id, t.clone())).unzip();
    let (consumers, keys) = columns(ids.into_iter());
    sqlx::query(statement)
        .bind(consumers)
        .bind(keys)
        .bind(tokens)
}

/// Per key of a claim batch, its row after the statement: consumer, key,
/// token, and whether its window or lease is still running.
type AnswerRow = (String, String, Option<String>, bool);

async fn claim(pool: &PgPool, mut claims: Vec<ClaimOp>) {
    if claims.is_empty() {
        return;
    }
    claims.sort_by(|a, b| a.0.cmp(&b.0));
    // The same key twice in one batch: the second waits for the first.
    let mut batch: Vec<ClaimOp> = Vec::with_capacity(claims.len());
    for claim in claims {
        if batch.last().is_some_and(|last| last.0 == claim.0) {
            let _ = claim.3.send(Ok(Answer::InProgress));
        } else {
            batch.push(claim);
        }
    }
    let (consumers, keys) = columns(batch.iter().map(|c| &c.0));
    let tokens: Vec<&str> = batch.iter().map(|c| c.1.as_str()).collect();
    let windows: Vec<f64> = batch.iter().map(|c| c.2).collect();
    // A claimed key holds its token, its lease's end, and already the end
    // of its window, a hundredth longer (so that a completion within a
    // hundredth of the window leaves the indexed column as it is, a HOT
    // update). A key that is not free is written back as it was, so that
    // every key of the batch returns its row: ours (our token), completed
    // within its window (no token), or someone else's.
    let answers: Result<Vec<AnswerRow>, sqlx::Error> = sqlx::query_as(concat!(
        "INSERT INTO rabbit_backoff_inbox AS inbox (consumer, key, expires_at, token, lease_until)
        SELECT consumer, key, now() + make_interval(secs => w * ",
        window_slack!(),
        "), token, now() + make_interval(secs => $5)
        FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[]) AS t(consumer, key, token, w)
        ON CONFLICT (consumer, key) DO UPDATE SET
            token = CASE WHEN ",
        inbox_row_is_free!(),
        " THEN EXCLUDED.token ELSE inbox.token END,
            lease_until = CASE WHEN ",
        inbox_row_is_free!(),
        " THEN EXCLUDED.lease_until ELSE inbox.lease_until END,
            expires_at = CASE WHEN ",
        inbox_row_is_free!(),
        " THEN EXCLUDED.expires_at ELSE inbox.expires_at END
        RETURNING inbox.consumer, inbox.key, inbox.token, inbox.expires_at > now()"
    ))
    .bind(&consumers)
    .bind(&keys)
    .bind(&tokens)
    .bind(&windows)
    .bind(LEASE.as_secs_f64())
    .fetch_all(pool)
    .await;
    match answers {
        Ok(rows) => {
            let found: HashMap<Id, (Option<String>, bool)> = rows
                .into_iter()
                .map(|(c, k, token, running)| ((c, k), (token, running)))
                .collect();
            for (id, token, _, reply) in batch {
                let answer = match found.get(&id) {
                    Some((Some(held), _)) if *held == token => Answer::Claimed,
                    Some((None, true)) => Answer::Duplicate,
                    _ => Answer::InProgress,
                };
                let _ = reply.send(Ok(answer));
            }
        }
        Err(e) => {
            for (_, _, _, reply) in batch {
                let _ = reply.send(Err(e.to_string()));
            }
        }
    }
}

/// Completes a batch of keys, with a synchronous commit: each is durable
/// before its delivery is acked.
async fn complete(pool: PgPool, mut completes: Vec<CompleteOp>) {
    if completes.is_empty() {
        return;
    }
    completes.sort_by(|a, b| a.0.cmp(&b.0));
    // A key once a statement (twice is an error); every sender is answered.
    let mut rows: Vec<(&Id, f64)> = completes.iter().map(|c| (&c.0, c.1)).collect();
    rows.dedup_by(|a, b| a.0 == b.0);
    let (consumers, keys) = columns(rows.iter().map(|r| r.0));
    let windows: Vec<f64> = rows.iter().map(|r| r.1).collect();
    // The window's end set at the claim stands when it is at least a
    // window from now (a HOT update: no index changes); a longer handler
    // moves it.
    let done = sqlx::query(
        "INSERT INTO rabbit_backoff_inbox AS inbox (consumer, key, expires_at, token)
        SELECT consumer, key, now() + make_interval(secs => w), NULL
        FROM unnest($1::text[], $2::text[], $3::float8[]) AS t(consumer, key, w)
        ON CONFLICT (consumer, key) DO UPDATE SET token = NULL, lease_until = NULL,
            expires_at = greatest(inbox.expires_at, EXCLUDED.expires_at)",
    )
    .bind(&consumers)
    .bind(&keys)
    .bind(&windows)
    .execute(&pool)
    .await
    .map(|_| ())
    .map_err(|e| e.to_string());
    for (_, _, reply) in completes {
        let _ = reply.send(done.clone());
    }
}

async fn release(pool: &PgPool, mut releases: Vec<ReleaseOp>) {
    if releases.is_empty() {
        return;
    }
    releases.sort_by(|a, b| a.0.cmp(&b.0));
    // A released key's row is left free (expired, no token) where the
    // claim is still ours; one that is gone comes back free, for the
    // cleanup.
    let done = still_ours(
        where_still_ours!("SET expires_at = '-infinity', token = NULL, lease_until = NULL"),
        releases.iter().map(|c| (&c.0, &c.1)),
    )
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
        // A row that is gone (its lease ran out and the cleanup took it)
        // comes back free (expired): the claim lapsed. The lease is outside
        // every index: a renewal is a HOT update.
        let renewed = still_ours(
            where_still_ours!("SET lease_until = now() + make_interval(secs => $4)"),
            claims.iter().map(|c| (&c.0, &c.1)),
        )
        .bind(LEASE.as_secs_f64())
        .execute(&pool)
        .await;
        if let Err(e) = renewed {
            tracing::warn!("renewing {} claims: {e}", claims.len());
        }
    }
}
