//! [`DeadLetterIndexDecl`]: the dead-letter index's two streams, and their
//! retention.

use serde::{Deserialize, Serialize};

use super::argument::Argument;
use super::arguments as arg;
use super::binding::Binding;
use super::queue_decl::QueueDecl;

/// The retention of the dead-letter index (`x-max-length-bytes`): 2 GiB,
/// about 1.6 million dead letters of 1 KiB. Past it the broker drops the
/// oldest segment, the index no longer counts what the dead-letter queue
/// holds, and `dlq groups` reads the queue instead.
pub const INDEX_MAX_BYTES: i64 = 2 << 30;

/// The segment size of the dead-letter index: retention drops whole
/// segments, so the index keeps between [`INDEX_MAX_BYTES`] less one segment
/// and [`INDEX_MAX_BYTES`].
pub const INDEX_SEGMENT_BYTES: i64 = 100 << 20;

/// The retention of the index's tombstones: 128 MiB, 8 bytes per removed
/// dead letter, more than the removals of every entry the index can hold.
pub const INDEX_REMOVALS_MAX_BYTES: i64 = 128 << 20;

/// The segment size of the index's tombstone stream.
pub const INDEX_REMOVALS_SEGMENT_BYTES: i64 = 16 << 20;

/// The dead-letter index: two streams beside the dead-letter queue. The
/// consumer writes a summary of every dead letter it makes to `entries`
/// once the broker confirmed it in the dead-letter queue, many to a stream
/// message ([`IndexBatch`](crate::IndexBatch)); `dlq import` writes what it
/// imports there too. The operator tools write what they remove from the
/// queue to `removals`. `dlq groups` reads both instead of the queue.
///
/// Neither stream is bound to anything: `binding` is the one earlier
/// versions gave `entries` (the broker then stored a second copy of every
/// dead letter), which a consumer removes when it finds it.
///
/// ```
/// use rabbit_backoff::ConsumerSpec;
/// use rabbit_backoff::topology::{Argument, Topology};
///
/// let spec = ConsumerSpec::new("orders", "5s".parse()?);
/// let index = Topology::of(&spec).dead_letter_index;
/// assert_eq!(index.entries.name, "orders.dlq.index");
/// assert_eq!(index.entries.argument("x-queue-type"), Some(&Argument::Str("stream".into())));
/// assert_eq!(index.binding.exchange, "orders.dlx");
/// assert_eq!(index.binding.routing_key, "orders.dlq");
/// assert_eq!(index.removals.name, "orders.dlq.index.removed");
/// # Ok::<(), rabbit_backoff::DelayError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeadLetterIndexDecl {
    /// The stream of entries, written to directly.
    pub entries: QueueDecl,
    /// The stream of tombstones, written to directly.
    pub removals: QueueDecl,
    /// The binding earlier versions gave `entries` (the dead-letter queue's
    /// exchange and key), which a consumer removes: no stream is bound to
    /// the dead-letter exchange any more.
    pub binding: Binding,
}

impl DeadLetterIndexDecl {
    pub(super) fn of(names: &crate::TopologyNames) -> Self {
        let stream = |name: String, max: i64, segment: i64| QueueDecl {
            name,
            arguments: vec![
                (
                    arg::QUEUE_TYPE.to_owned(),
                    Argument::Str(arg::STREAM.to_owned()),
                ),
                (arg::MAX_LENGTH_BYTES.to_owned(), Argument::Int(max)),
                (
                    arg::STREAM_MAX_SEGMENT_SIZE_BYTES.to_owned(),
                    Argument::Int(segment),
                ),
            ],
        };
        let entries = stream(
            names.dead_letter_index(),
            INDEX_MAX_BYTES,
            INDEX_SEGMENT_BYTES,
        );
        DeadLetterIndexDecl {
            binding: Binding {
                queue: entries.name.clone(),
                exchange: names.dead_letter_exchange.clone(),
                routing_key: names.dead_letter_routing_key.clone(),
            },
            entries,
            removals: stream(
                names.dead_letter_index_removals(),
                INDEX_REMOVALS_MAX_BYTES,
                INDEX_REMOVALS_SEGMENT_BYTES,
            ),
        }
    }

    /// Its two streams.
    pub fn queues(&self) -> [&QueueDecl; 2] {
        [&self.entries, &self.removals]
    }
}
