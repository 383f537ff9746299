//! What the inbox asks of a store: claim a key, then complete or release it.

use std::future::ready;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::dedupe::StoreError;
use crate::transport::Channel;

/// How many outbox messages a store published, when it is done.
pub type Counted<'a> = BoxFuture<'a, Result<usize, StoreError>>;

/// Where a store's outbox publishes: a channel in confirm mode, and how long
/// each confirmation may take.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct OutboxChannel<'a> {
    /// A channel in confirm mode.
    pub channel: &'a dyn Channel,
    /// How long a message's confirmation may take before its publish counts
    /// as failed (it stays in the outbox).
    pub confirm_timeout: Duration,
}

impl<'a> OutboxChannel<'a> {
    /// Publishing on `channel`, each confirmation awaited `confirm_timeout`
    /// at most.
    pub fn new(channel: &'a dyn Channel, confirm_timeout: Duration) -> Self {
        OutboxChannel {
            channel,
            confirm_timeout,
        }
    }
}

/// One delivery's request for its key.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ClaimRequest<'a> {
    /// The consumer (its work queue): each has keys of its own.
    pub consumer: &'a str,
    /// The delivery's inbox key.
    pub key: &'a str,
    /// How long the key is remembered once completed.
    pub window: Duration,
    /// Whether the handler writes in the store's transaction (takes `Tx`):
    /// a `PostgresStore` holds a transaction through the handler for it, and
    /// claims the other keys in batches, with a lease.
    pub transaction: bool,
}

impl<'a> ClaimRequest<'a> {
    /// The claim of `consumer`'s key `key`, remembered for `window` once
    /// completed, for a handler that does not write in the store's
    /// transaction until [`with_transaction`](Self::with_transaction) says it does.
    ///
    /// ```
    /// use std::time::Duration;
    /// use rabbit_backoff::dedupe::ClaimRequest;
    ///
    /// let request = ClaimRequest::new("orders", "order-7", Duration::from_secs(86_400))
    ///     .with_transaction(true);
    /// assert!(request.transaction);
    /// ```
    pub fn new(consumer: &'a str, key: &'a str, window: Duration) -> Self {
        ClaimRequest {
            consumer,
            key,
            window,
            transaction: false,
        }
    }

    /// The same claim, for a handler that writes in the store's transaction
    /// (`true`) or not.
    pub fn with_transaction(mut self, transaction: bool) -> Self {
        self.transaction = transaction;
        self
    }
}

/// A store of handled keys: the inbox of every consumer with `dedupe`.
///
/// [`MemoryStore`](crate::dedupe::MemoryStore), `RedisStore` and
/// `PostgresStore` implement it; implement it for another store the same
/// way. A claim must be exclusive: while one delivery holds a key, a claim of
/// the same key answers [`Claim::InProgress`].
pub trait DedupeStore: Send + Sync + 'static {
    /// Claims a delivery's key: [`Claim::Claimed`] when the handler may run,
    /// [`Claim::Duplicate`] when the key completed within the window,
    /// [`Claim::InProgress`] when another delivery holds it now.
    fn claim<'a>(&'a self, request: ClaimRequest<'a>) -> BoxFuture<'a, Result<Claim, StoreError>>;

    /// Checks that the store answers.
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Where the store is, for logs, errors and health, without a password.
    fn describe(&self) -> String;

    /// Whether a claim holds a transaction, which handlers take as `Tx`.
    fn transactional(&self) -> bool {
        false
    }

    /// Publishes the outbox messages with these ids (from
    /// [`Completed::outbox`]) on `to`, each confirmed, and removes them;
    /// how many it published. Messages another process is publishing now
    /// are left to it.
    fn dispatch<'a>(&'a self, ids: &'a [i64], to: OutboxChannel<'a>) -> Counted<'a> {
        let _ = (ids, to);
        Box::pin(ready(Ok(0)))
    }

    /// Publishes on `to` the outbox messages whose dispatch did not happen
    /// (their process died between its commit and their dispatch); how many
    /// it published.
    fn relay<'a>(&'a self, to: OutboxChannel<'a>) -> Counted<'a> {
        let _ = to;
        Box::pin(ready(Ok(0)))
    }

    /// How often the runtime runs [`relay`](Self::relay); `None`: never (a
    /// store without an outbox).
    fn relay_interval(&self) -> Option<Duration> {
        None
    }
}

impl<S: DedupeStore + ?Sized> DedupeStore for Arc<S> {
    fn claim<'a>(&'a self, request: ClaimRequest<'a>) -> BoxFuture<'a, Result<Claim, StoreError>> {
        (**self).claim(request)
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        (**self).ping()
    }

    fn describe(&self) -> String {
        (**self).describe()
    }

    fn transactional(&self) -> bool {
        (**self).transactional()
    }

    fn dispatch<'a>(&'a self, ids: &'a [i64], to: OutboxChannel<'a>) -> Counted<'a> {
        (**self).dispatch(ids, to)
    }

    fn relay<'a>(&'a self, to: OutboxChannel<'a>) -> Counted<'a> {
        (**self).relay(to)
    }

    fn relay_interval(&self) -> Option<Duration> {
        (**self).relay_interval()
    }
}

/// The answer to a claim.
#[non_exhaustive]
pub enum Claim {
    /// The key is this delivery's: run the handler, then complete or release it.
    Claimed(Box<dyn HeldKey>),
    /// The key completed within the window: acknowledge without the handler.
    Duplicate,
    /// Another delivery holds the key now: requeue this one after a pause.
    InProgress,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Claim::Claimed(_) => "Claimed",
            Claim::Duplicate => "Duplicate",
            Claim::InProgress => "InProgress",
        })
    }
}

/// A claimed key, until it is completed or released. Dropped without
/// either (the process stopping), it is released: by the store's lease, or
/// by the end of its transaction.
pub trait HeldKey: Send + Sync {
    /// The handler succeeded: its effects (in a transactional store) and
    /// the key commit together; the outbox messages to dispatch now.
    fn complete(self: Box<Self>) -> BoxFuture<'static, Result<Completed, StoreError>>;

    /// The message is done with although its handler failed (dead-lettered,
    /// discarded): its effects are rolled back, the key is completed.
    fn complete_failed(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>>;

    /// A transient failure: its effects are rolled back and the key is free
    /// for the retry.
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>>;

    /// Before an immediate retry: rolls back what the failed call wrote.
    fn restart_attempt(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(ready(Ok(())))
    }

    /// The transaction the handler writes in (`Tx`), in a transactional store.
    #[cfg(feature = "postgres")]
    fn transaction(&self) -> Option<Arc<crate::dedupe::Transaction>> {
        None
    }
}

/// What completing a key left to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completed {
    /// Outbox messages committed with the key, to dispatch now.
    pub outbox: Vec<i64>,
}

impl Completed {
    /// A completed key, with the outbox messages `outbox` committed with it
    /// (empty for a store without an outbox).
    ///
    /// ```
    /// use rabbit_backoff::dedupe::Completed;
    ///
    /// assert_eq!(Completed::new(Vec::new()), Completed::default());
    /// ```
    pub fn new(outbox: Vec<i64>) -> Self {
        Completed { outbox }
    }
}
