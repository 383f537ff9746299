//! Everything the runtime fails with: [`Error`], and what its variants
//! carry of their own ([`MissingObject`], [`PublishFailure`]). It wraps the
//! errors of the parts below it (the transport's [`TransportError`], the
//! dedupe store's [`StoreError`], the core's [`SpecError`]) and is
//! re-exported at the crate's root.

use std::time::Duration;

use rabbit_backoff_core::SpecError;

use crate::store_error::StoreError;
use crate::transport::TransportError;

/// Everything the runtime can fail with. Each message names the queue,
/// exchange or argument involved and says what to do.
///
/// `Debug` prints the same readable message as `Display`, so that
/// `fn main() -> Result<(), rabbit_backoff::Error>` shows it on failure; match
/// on the variants for their fields.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A consumer's spec is invalid (usually a run-time override).
    #[error("consumer `{queue}` is misconfigured: {source}")]
    InvalidSpec {
        /// The consumer's queue.
        queue: String,
        /// What is wrong.
        source: SpecError,
    },
    /// Two consumers were registered for one queue.
    #[error("two consumers use the queue `{0}`; give each consumer its own queue")]
    DuplicateQueue(String),
    /// No consumer was registered.
    #[error("no consumer registered; add one with .consumer(…)")]
    NoConsumer,
    /// A handler takes `State<T>` but no `T` was registered.
    #[error(
        "consumer `{queue}` takes State<{type_name}>, but no value of that type was registered; call .state(…) on the builder"
    )]
    MissingState {
        /// The consumer's queue.
        queue: String,
        /// The missing type.
        type_name: &'static str,
    },
    /// A consumer has `dedupe` but the runtime has no dedupe store.
    #[error(
        "consumer `{queue}` has dedupe = \"…\", but the runtime has no dedupe store; add one to the builder: .dedupe_store(rabbit_backoff::dedupe::PostgresStore::connect(\"postgres://…\").await?), RedisStore::connect(\"redis://…\") or MemoryStore::new()"
    )]
    DedupeWithoutStore {
        /// The consumer's queue.
        queue: String,
    },
    /// A handler takes `Tx`, the dedupe store's transaction, but its
    /// consumer has no `dedupe` or the store has no transactions.
    #[error(
        "consumer `{queue}` takes Tx, the dedupe store's transaction, which needs dedupe = \"…\" on the consumer and a PostgresStore on the runtime ({found})"
    )]
    TransactionWithoutStore {
        /// The consumer's queue.
        queue: String,
        /// What the runtime has instead.
        found: String,
    },
    /// The dedupe store does not answer: the runtime waits for it before
    /// consuming, as for the broker.
    #[error("{0}; the consumers with dedupe wait for it")]
    DedupeStore(StoreError),
    /// The broker could not be reached.
    #[error(
        "cannot connect to RabbitMQ at {uri}: {source}; is the broker running? (the address comes from AMQP_URL)"
    )]
    Connect {
        /// The address, with the password hidden.
        uri: String,
        /// The client error.
        source: TransportError,
    },
    /// An existing queue or exchange has other arguments than the ones the
    /// consumer declares (the broker's PRECONDITION_FAILED).
    #[error(
        "{object} `{name}` already exists with a different {what}; the broker said: {detail}. {}",
        conflict_remedy(argument.as_deref())
    )]
    TopologyConflict {
        /// `queue` or `exchange`.
        object: &'static str,
        /// Its name.
        name: String,
        /// The argument that differs, such as `x-message-ttl`, when the broker named it.
        argument: Option<String>,
        /// `argument 'x-message-ttl'`, or `configuration`.
        what: String,
        /// The broker's own words.
        detail: String,
    },
    /// `declare = "passive"`: objects of the topology do not exist. Every
    /// missing object is listed, not only the first.
    #[error(
        "consumer `{queue}` only checks its topology (declare = \"passive\"), and {count} of its objects do not exist: {list}. Create them (for example with `rabbit-backoff topology --export-definitions` and `rabbitmqctl import_definitions`), or let the consumer declare them (declare = \"declare\")",
        count = missing.len(),
        list = missing.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    TopologyMissing {
        /// The consumer's work queue.
        queue: String,
        /// Every exchange and queue that does not exist.
        missing: Vec<MissingObject>,
    },
    /// Declaring a queue, exchange or binding failed for another reason.
    #[error("declaring {object} `{name}` failed: {source}")]
    Declare {
        /// `queue`, `exchange` or `binding`.
        object: &'static str,
        /// Its name.
        name: String,
        /// The client error.
        source: TransportError,
    },
    /// Opening or configuring a channel, or starting to consume, failed.
    #[error("{action} for queue `{queue}` failed: {source}")]
    Channel {
        /// What was being done.
        action: &'static str,
        /// The consumer's queue.
        queue: String,
        /// The client error.
        source: TransportError,
    },
    /// A consumer's delivery stream failed (the channel or connection closed).
    #[error("consumer of `{queue}` stopped: {source}")]
    Consume {
        /// The consumer's queue.
        queue: String,
        /// The client error.
        source: TransportError,
    },
    /// The broker cancelled a consumer (for example because its queue was deleted).
    #[error("the broker cancelled the consumer of `{queue}` (was the queue deleted?)")]
    Cancelled {
        /// The consumer's queue.
        queue: String,
    },
    /// A publish was not confirmed by the broker.
    #[error("publish to exchange `{exchange}` with routing key `{routing_key}` failed: {failure}")]
    Publish {
        /// The exchange.
        exchange: String,
        /// The routing key.
        routing_key: String,
        /// Why.
        failure: PublishFailure,
    },
    /// A message could not be encoded as JSON.
    #[error("cannot encode the message as JSON: {0}")]
    Encode(#[from] serde_json::Error),
    /// The runtime's task ended abnormally (it panicked or was cancelled).
    #[error("the runtime stopped: {0}")]
    Stopped(String),
    /// Reading or writing a file failed (`dlq export`, `dlq import`).
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The error.
        source: std::sync::Arc<std::io::Error>,
    },
    /// A name or header value does not fit AMQP's 255-byte short strings.
    #[error("{what} is {len} bytes long; AMQP allows at most 255")]
    TooLong {
        /// What it is.
        what: &'static str,
        /// Its length.
        len: usize,
    },
}

impl std::fmt::Debug for Error {
    /// The readable message, as `Display` (what a `main` returning this error
    /// prints); the fields are on the variants.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// An exchange or queue that a passive check did not find.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MissingObject {
    /// `exchange` or `queue`.
    pub object: &'static str,
    /// Its name.
    pub name: String,
}

impl MissingObject {
    /// The `object` (`exchange` or `queue`) named `name`.
    ///
    /// ```
    /// use rabbit_backoff::topology::MissingObject;
    ///
    /// let missing = MissingObject::new("queue", "orders.dlq");
    /// assert_eq!(missing.to_string(), "queue `orders.dlq`");
    /// ```
    pub fn new(object: &'static str, name: impl Into<String>) -> Self {
        MissingObject {
            object,
            name: name.into(),
        }
    }
}

impl std::fmt::Display for MissingObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} `{}`", self.object, self.name)
    }
}

/// What to do about a topology conflict on `argument`.
fn conflict_remedy(argument: Option<&str>) -> &'static str {
    match argument {
        // An existing classic queue where the consumer declares quorum ones
        // (the default when no queue type is named): the broker names the
        // type, or an argument only quorum queues are declared with.
        Some("x-queue-type" | "x-delivery-limit" | "x-dead-letter-strategy" | "x-overflow") => {
            "If it is a queue of another type: to keep an existing classic topology, add \
             queue_type = \"classic\" to #[backoff_consumer(...)] (or set spec.queue_type = \
             Some(QueueType::Classic)); to move to quorum queues, delete it once drained"
        }
        _ => "Delete it, or configure the consumer to match it",
    }
}

impl Error {
    /// Whether the node connected to cannot serve a consumer that another
    /// node could: a consumer with `retry = "delayed"` or `"scheduled"` on
    /// a node before RabbitMQ 4.3. The runtime then leaves the node and
    /// tries the others (see [`Health::WaitingForNode`](crate::Health::WaitingForNode)).
    pub fn is_node_unsuitable(&self) -> bool {
        matches!(
            self,
            Error::InvalidSpec {
                source: SpecError::DelayedUnsupported { .. }
                    | SpecError::ScheduledUnsupported { .. },
                ..
            }
        )
    }

    /// Whether reconnecting can help: true for a lost connection or channel,
    /// false for a misconfiguration such as a topology conflict.
    pub fn is_recoverable(&self) -> bool {
        matches!(
            self,
            Error::Connect { .. }
                | Error::Declare { .. }
                | Error::Channel { .. }
                | Error::Consume { .. }
                | Error::Cancelled { .. }
                | Error::DedupeStore(_)
        )
    }
}

/// Why the broker did not take a published message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishFailure {
    /// No queue is bound for the routing key (the message came back as
    /// mandatory-unroutable).
    #[error("unroutable: no queue is bound for this routing key")]
    Unroutable,
    /// The broker refused the message (for example a full queue with
    /// `x-overflow = reject-publish`).
    #[error("the broker refused it (nack)")]
    Nacked,
    /// No confirm arrived in time.
    #[error("no confirm within {0:?}")]
    Timeout(Duration),
    /// The channel or connection failed.
    #[error("{0}")]
    Channel(TransportError),
}

/// Maps a transport error to [`Error::Channel`] naming the queue and the action.
pub(crate) fn channel_error(
    queue: &str,
    action: &'static str,
) -> impl FnOnce(TransportError) -> Error {
    let queue = queue.to_owned();
    move |source| Error::Channel {
        action,
        queue,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_the_readable_message() {
        let e = Error::TopologyConflict {
            object: "queue",
            name: "retry_1ms".into(),
            argument: Some("x-dead-letter-exchange".into()),
            what: "argument 'x-dead-letter-exchange'".into(),
            detail: "PRECONDITION_FAILED - inequivalent arg".into(),
        };
        assert_eq!(format!("{e:?}"), e.to_string());
        assert!(format!("{e:?}").starts_with("queue `retry_1ms` already exists"));
        // What `fn main() -> Result<(), Error>` prints.
        let main: Result<(), Error> = Err(e);
        assert!(!format!("{main:?}").contains("TopologyConflict {"));
    }

    #[test]
    fn a_missing_topology_lists_every_missing_object() {
        let e = Error::TopologyMissing {
            queue: "work_queue".into(),
            missing: vec![
                MissingObject {
                    object: "exchange",
                    name: "dlx_exchange".into(),
                },
                MissingObject {
                    object: "queue",
                    name: "retry_50ms".into(),
                },
            ],
        };
        let message = e.to_string();
        assert!(
            message.contains(
                "2 of its objects do not exist: exchange `dlx_exchange`, queue `retry_50ms`."
            ),
            "{message}"
        );
        assert!(!e.is_recoverable());
    }
}
