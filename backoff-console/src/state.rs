//! The console's shared state and the services its handlers share: the
//! consumers found on the broker, one pass at a time per dead-letter queue,
//! one replay-job request at a time per replay log, equal reads in flight
//! shared, the reader connection for depths and tiers, who wrote, and the
//! audit log.

use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::http::StatusCode;
use rabbit_backoff_dead_letters::Dlq;
use rabbit_backoff_runtime::transport::Connection;

use rabbit_backoff_dead_letters::discovery::{self, DiscoveredConsumer};
use serde::Serialize;

use crate::api_error::ApiError;
use crate::broker::depths;
use crate::broker::reader::Reader;
use crate::queue_locks::QueueLocks;
use crate::security::audit::AuditLog;
use crate::security::guard::{self, Access, Operator};
use crate::shared_json::SharedJson;
use crate::single_flight::SingleFlight;

/// A call on a dead-letter queue's [`Dlq`], for [`State::with_dlq`].
pub(crate) type DlqCall<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Reads in flight, shared by equal reads: those of the same type of
/// result and the same key. Each result is shared as it is, whatever view
/// reads it; [`State::shared_read`] hands it back as its own type.
type Reads = SingleFlight<(TypeId, String), Result<Arc<dyn Any + Send + Sync>, ApiError>>;

/// What the handlers share: where the broker and its management API are,
/// the locks and reads in flight per queue, the audit log.
pub(crate) struct State {
    /// The AMQP address.
    pub(crate) amqp_url: String,
    /// The management API's address.
    pub(crate) management_url: String,
    /// Whether writes are allowed.
    pub(crate) access: Access,
    /// Where writes are recorded.
    pub(crate) audit: Option<AuditLog>,
    /// One lock per dead-letter queue, held through every pass over it. A
    /// pass holds the messages it has read until it ends, so a replay beside
    /// a read of the same queue would miss them: passes over one queue run
    /// one at a time (over different queues, side by side). A replay job's
    /// driver does not take it: it runs for minutes, and the views go on
    /// beside it (a view read while one of its waves runs misses the
    /// messages the wave holds, and the wave leaves those the read holds in
    /// the queue, untouched).
    locks: QueueLocks,
    /// One lock per replay log, held while a request starts, takes over,
    /// controls or reads its replay jobs. Reading whether a job runs takes
    /// the log's job lock for a moment, so a start beside a read of the
    /// same log would find the queue busy.
    job_locks: QueueLocks,
    /// Reads in flight, shared by equal reads.
    reads: Reads,
    /// A connection for depths and retry tiers, opened once.
    reader: Reader,
    /// Passes of the dead-letters view so far.
    pub(crate) passes: AtomicU64,
    /// The queues' last exact depths.
    remembered: depths::Remembered,
    /// Where the dead-letter index is read over the stream protocol (0:
    /// over AMQP only).
    stream_port: u16,
}

impl State {
    /// A console's state over this broker, reading dead-letter indexes at
    /// `stream_port`.
    pub(crate) fn new(
        amqp_url: String,
        management_url: String,
        access: Access,
        audit: Option<AuditLog>,
        stream_port: u16,
    ) -> State {
        State {
            amqp_url,
            management_url,
            access,
            audit,
            stream_port,
            locks: QueueLocks::default(),
            job_locks: QueueLocks::default(),
            reads: Reads::default(),
            reader: Reader::default(),
            passes: AtomicU64::new(0),
            remembered: depths::Remembered::default(),
        }
    }

    /// A read of `queue`'s dead letters that the equal reads in flight
    /// (those of a `T` under `key`) share: one at a time on the queue, on a
    /// connection of its own, closed after; its result as the response.
    pub(crate) async fn shared_read<T, R>(
        self: &Arc<Self>,
        key: String,
        queue: String,
        read: R,
    ) -> Result<SharedJson<T>, ApiError>
    where
        T: Any + Send + Sync,
        R: for<'a> FnOnce(&'a Dlq) -> DlqCall<'a, Result<T, ApiError>> + Send,
    {
        let state = Arc::clone(self);
        let shared = self
            .reads
            .run((TypeId::of::<T>(), key), || async move {
                let (_, read) = state.with_dlq(&queue, read).await?;
                read.map(|read| Arc::new(read) as Arc<dyn Any + Send + Sync>)
            })
            .await?;
        let shared = shared
            .downcast::<T>()
            .unwrap_or_else(|_| unreachable!("a read in flight is keyed by its type"));
        Ok(SharedJson(shared))
    }

    /// Runs `call` on the dead-letter queue of `queue`, one at a time with
    /// the other passes over it, on a connection of its own, closed after;
    /// the consumer and what `call` returned.
    pub(crate) async fn with_dlq<T>(
        &self,
        queue: &str,
        call: impl for<'a> FnOnce(&'a Dlq) -> DlqCall<'a, T>,
    ) -> Result<(DiscoveredConsumer, T), ApiError> {
        let _one_at_a_time = self.locks.lock(queue).await;
        let (consumer, dlq) = self.connect(queue).await?;
        let result = call(&dlq).await;
        dlq.close().await;
        Ok((consumer, result))
    }

    /// Runs `call` on the replay jobs of the dead-letter queue of `queue`,
    /// one at a time with the other requests about them, on a connection of
    /// its own, closed after; the consumer and what `call` returned. `call`
    /// may start or take over a job on a connection of its own
    /// ([`State::connect`]): a job's driver is never read from its own
    /// connection, where the read would release the job's lock.
    pub(crate) async fn with_replay_log<T>(
        &self,
        queue: &str,
        call: impl for<'a> FnOnce(&'a DiscoveredConsumer, &'a Dlq) -> DlqCall<'a, T>,
    ) -> Result<(DiscoveredConsumer, T), ApiError> {
        let _one_at_a_time = self.job_locks.lock(queue).await;
        let (consumer, dlq) = self.connect(queue).await?;
        let result = call(&consumer, &dlq).await;
        dlq.close().await;
        Ok((consumer, result))
    }

    /// A connection to the dead-letter queue of `queue`'s consumer, for the
    /// caller to close.
    pub(crate) async fn connect(&self, queue: &str) -> Result<(DiscoveredConsumer, Dlq), ApiError> {
        let consumer = self.consumer(queue).await?;
        let dlq = self.connect_to(&consumer).await?;
        Ok((consumer, dlq))
    }

    /// A connection to the dead-letter queue of `consumer`, for the caller
    /// to close.
    pub(crate) async fn connect_to(&self, consumer: &DiscoveredConsumer) -> Result<Dlq, ApiError> {
        Ok(Dlq::connect(&self.amqp_url, &consumer.spec)
            .await
            .map_err(ApiError::broker)?
            .stream_port(self.stream_port)
            .stream_protocol(self.stream_port != 0))
    }

    /// Every consumer found on the broker.
    pub(crate) async fn discover(&self) -> Result<Vec<DiscoveredConsumer>, ApiError> {
        discovery::discover_async(&self.amqp_url, &self.management_url)
            .await
            .map_err(ApiError::broker)
    }

    /// The consumer whose work queue is `queue`.
    pub(crate) async fn consumer(&self, queue: &str) -> Result<DiscoveredConsumer, ApiError> {
        self.discover()
            .await?
            .into_iter()
            .find(|c| c.queue == queue)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "no consumer with the work queue `{queue}` was found"
                ))
            })
    }

    /// The connection for depths and tiers, opened on first use.
    pub(crate) async fn reader(&self) -> Result<Arc<dyn Connection>, ApiError> {
        self.reader
            .connection(&self.amqp_url)
            .await
            .map_err(ApiError::broker)
    }

    /// Drops the reader's connection after an error, so that the next read
    /// opens a new one.
    pub(crate) async fn forget_reader(&self) {
        self.reader.forget().await;
    }

    /// Puts the broker's current counts into the depths of `consumer`.
    pub(crate) async fn refresh_depths(
        &self,
        consumer: &mut DiscoveredConsumer,
    ) -> Result<(), ApiError> {
        let connection = self.reader().await?;
        let passing = self.locks.is_held(&consumer.queue);
        if let Err(e) = depths::refresh(&connection, consumer, &self.remembered, passing).await {
            self.forget_reader().await;
            return Err(ApiError::broker(e));
        }
        Ok(())
    }

    /// The name of the token a write came with; refused in read-only mode.
    pub(crate) fn writer(&self, operator: Option<&Operator>) -> Result<String, ApiError> {
        // The guard refuses writes to a read-only console already; this is
        // the second lock on the same door.
        if self.access == Access::ReadOnly {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                guard::Refusal::ReadOnly.message(),
            ));
        }
        let Some(Operator(who)) = operator else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                guard::Refusal::MissingToken.message(),
            ));
        };
        Ok(who.clone())
    }

    /// Appends `entry` (a write's `AuditEntry`) to the audit log (when
    /// there is one).
    pub(crate) async fn record(&self, entry: &impl Serialize) -> Result<(), ApiError> {
        if let Some(log) = &self.audit
            && let Err(e) = log.record(entry).await
        {
            // The write is done; the operator must learn that it is not on record.
            eprintln!("rabbit-backoff console: {e}");
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("done, but not recorded in the audit log: {e}"),
            ));
        }
        Ok(())
    }
}
