//! The console's shared state and the services its handlers share: the
//! consumers found on the broker, one pass at a time per dead-letter queue,
//! equal reads in flight shared, the reader connection for depths and tiers,
//! who wrote, and the audit log.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::Extension;
use axum::http::StatusCode;
use rabbit_backoff::dead_letters::Dlq;
use rabbit_backoff::transport::Connection;

use super::api_error::ApiError;
use super::audit::{AuditEntry, AuditLog};
use super::depths;
use super::guard::{self, Access, Operator};
use super::single_flight::SingleFlight;
use crate::discovery::{self, DiscoveredConsumer};
use crate::stream_port_args::StreamPortArgs;

/// A read of a dead-letter queue through its [`Dlq`], for
/// [`Console::shared_read`].
pub(super) type DeadLetterRead<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<Arc<serde_json::Value>, ApiError>> + Send + 'a>>;

/// A read's result, shared by the reads of the same thing in flight.
pub(super) type Shared = Result<Arc<serde_json::Value>, ApiError>;

/// What the handlers share: where the broker and its management API are,
/// the locks and reads in flight per queue, the audit log.
pub struct Console {
    /// The AMQP address.
    pub amqp_url: String,
    /// The management API's address.
    pub management_url: String,
    /// Whether writes are allowed.
    pub access: Access,
    /// Where writes are recorded.
    pub audit: Option<AuditLog>,
    /// One lock per dead-letter queue, held through every pass over it. A
    /// pass holds the messages it has read until it ends, so a replay beside
    /// a read of the same queue would miss them: passes over one queue run
    /// one at a time (over different queues, side by side).
    pub locks: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Reads in flight, shared by equal reads.
    pub reads: SingleFlight<String, Shared>,
    /// A connection for depths and retry tiers, opened once.
    pub reader: tokio::sync::Mutex<Option<Arc<dyn Connection>>>,
    /// Passes of the dead-letters view so far.
    pub passes: std::sync::atomic::AtomicU64,
    /// The queues' last exact depths.
    pub remembered: depths::Remembered,
    /// Where the dead-letter index is read over the stream protocol.
    pub stream: StreamPortArgs,
}

impl Console {
    /// A console over this broker, reading dead-letter indexes at the
    /// stream port of `stream`.
    pub fn new(
        amqp_url: String,
        management_url: String,
        access: Access,
        audit: Option<AuditLog>,
        stream: StreamPortArgs,
    ) -> Console {
        Console {
            amqp_url,
            management_url,
            access,
            audit,
            stream,
            locks: std::sync::Mutex::new(HashMap::new()),
            reads: SingleFlight::default(),
            reader: tokio::sync::Mutex::new(None),
            passes: std::sync::atomic::AtomicU64::new(0),
            remembered: depths::Remembered::default(),
        }
    }
}

impl Console {
    /// A read of `queue`'s dead letters that the equal reads in flight
    /// (those of `key`) share: one at a time on the queue, on a connection
    /// of its own, closed after; its result as the response.
    pub(super) async fn shared_read<R>(
        self: &Arc<Self>,
        key: String,
        queue: String,
        read: R,
    ) -> Result<Json<serde_json::Value>, ApiError>
    where
        R: for<'a> FnOnce(&'a Dlq) -> DeadLetterRead<'a> + Send,
    {
        let console = Arc::clone(self);
        let shared = self
            .reads
            .run(key, || async move {
                let _one_at_a_time = console.lock(&queue).await;
                let dlq = console.dlq(&queue).await?.1;
                let read = read(&dlq).await;
                dlq.close().await;
                read
            })
            .await?;
        Ok(Json((*shared).clone()))
    }

    pub(super) async fn discover(&self) -> Result<Vec<DiscoveredConsumer>, ApiError> {
        discovery::discover_async(&self.amqp_url, &self.management_url)
            .await
            .map_err(ApiError::broker)
    }

    /// The consumer whose work queue is `queue`.
    pub(super) async fn consumer(&self, queue: &str) -> Result<DiscoveredConsumer, ApiError> {
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

    /// The consumer whose work queue is `queue`, and its dead-letter queue.
    pub(super) async fn dlq(&self, queue: &str) -> Result<(DiscoveredConsumer, Dlq), ApiError> {
        let consumer = self.consumer(queue).await?;
        let dlq = Dlq::connect(&self.amqp_url, &consumer.spec)
            .await
            .map_err(ApiError::broker)?;
        let dlq = self.stream.apply(dlq);
        Ok((consumer, dlq))
    }

    /// Held while a pass runs over the dead-letter queue of `queue`.
    pub(super) async fn lock(&self, queue: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(locks.entry(queue.to_owned()).or_default())
        };
        lock.lock_owned().await
    }

    /// The connection for depths and tiers, opened on first use.
    pub(super) async fn reader(&self) -> Result<Arc<dyn Connection>, ApiError> {
        let mut reader = self.reader.lock().await;
        if let Some(connection) = &*reader {
            return Ok(Arc::clone(connection));
        }
        let connection = rabbit_backoff::connect(&self.amqp_url)
            .await
            .map_err(ApiError::broker)?;
        *reader = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// Drops the reader's connection after an error, so that the next read
    /// opens a new one.
    pub(super) async fn forget_reader(&self) {
        if let Some(connection) = self.reader.lock().await.take() {
            connection.close().await;
        }
    }

    pub(super) async fn refresh_depths(
        &self,
        consumer: &mut DiscoveredConsumer,
    ) -> Result<(), ApiError> {
        let connection = self.reader().await?;
        let passing = self
            .locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&consumer.queue)
            .is_some_and(|lock| lock.try_lock().is_err());
        if let Err(e) = depths::refresh(&connection, consumer, &self.remembered, passing).await {
            self.forget_reader().await;
            return Err(ApiError::broker(e));
        }
        Ok(())
    }

    /// The name of the token a write came with; refused in read-only mode.
    pub(super) fn writer(&self, operator: Option<Extension<Operator>>) -> Result<String, ApiError> {
        // The guard refuses writes to a read-only console already; this is
        // the second lock on the same door.
        if self.access == Access::ReadOnly {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                guard::Refusal::ReadOnly.message(),
            ));
        }
        let Some(Extension(Operator(who))) = operator else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                guard::Refusal::MissingToken.message(),
            ));
        };
        Ok(who)
    }

    /// Appends `entry` to the audit log (when there is one).
    pub(super) async fn record(&self, entry: &AuditEntry) -> Result<(), ApiError> {
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
