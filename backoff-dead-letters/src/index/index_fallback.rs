//! Why `dlq groups` read the dead-letter queue instead of its index.

use serde::Serialize;

/// Why [`Dlq::group_report`](crate::Dlq::group_report) read the dead-letter
/// queue (a pass) instead of the dead-letter index.
///
/// ```
/// use rabbit_backoff::dead_letters::IndexFallback;
///
/// let why = IndexFallback::CountMismatch { indexed: 7, depth: 5 };
/// assert_eq!(
///     why.to_string(),
///     "the index counts 7 dead letters but the queue holds 5"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum IndexFallback {
    /// The index was not to be read ([`Dlq::use_index`](crate::Dlq::use_index)).
    #[error("the index was not to be read")]
    NotAsked,
    /// No index beside the queue (a topology declared before the index
    /// existed, passively, or on a broker without streams).
    #[error("there is no index beside the queue")]
    Absent,
    /// The filter stops at a number of messages in the queue's order
    /// (`limit`); only a pass knows where that is.
    #[error("a limited read follows the queue's order")]
    Limited,
    /// The filter searches for text (`text`), in bodies and headers that
    /// the index's entries do not keep: only a pass reads them.
    #[error("a text search reads the messages, which the index does not keep")]
    TextSearch,
    /// The queue's depth changed while the index's end was marked.
    #[error("the queue changed from {before} to {after} dead letters while the index was read")]
    Moving {
        /// The depth before.
        before: u32,
        /// The depth after.
        after: u32,
    },
    /// The index does not count what the queue holds: its retention dropped
    /// entries, or messages left the queue without a tombstone (a purge, a
    /// `basic.get` in the management UI, a length limit, a shovel) or
    /// reached it without an entry (the broker's own dead-lettering,
    /// another publisher, an entry the consumer's writer dropped).
    #[error("the index counts {indexed} dead letters but the queue holds {depth}")]
    CountMismatch {
        /// Entries without a tombstone.
        indexed: usize,
        /// Ready messages in the queue.
        depth: usize,
    },
    /// The index starts from a checkpoint, which keeps each group's count
    /// and not its messages, and the filter needs the messages (anything
    /// but `group`): a pass reads them. The index answers such a filter
    /// again once the checkpoint's dead letters have all left the queue.
    #[error(
        "the index starts from a checkpoint that keeps {checkpointed} dead letters by group, \
         not their messages, which this filter needs"
    )]
    FilterPastCheckpoint {
        /// Dead letters that the checkpoint counts and still in the queue.
        checkpointed: usize,
    },
    /// A rebuild of the index was asked for
    /// ([`Dlq::rebuild_index`](crate::Dlq::rebuild_index)): a pass reads
    /// the queue and leaves a checkpoint, whatever the index says.
    #[error("a rebuild of the index was asked for")]
    Rebuild,
    /// Reading the index failed.
    #[error("the index could not be read: {reason}")]
    Unreadable {
        /// What failed.
        reason: String,
    },
}
