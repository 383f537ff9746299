//! What a group report had to do with the dead-letter index's checkpoint.

use serde::Serialize;

/// What [`Dlq::group_report`](crate::Dlq::group_report) or
/// [`Dlq::purge`](crate::Dlq::purge) did with the checkpoint of the
/// dead-letter index: the snapshot, per group, of what a pass saw in the
/// queue, which stands for every entry of the index before an offset, so
/// that the index answers again after messages left the queue without a
/// tombstone (a purge, a length limit) or came without an entry.
///
/// ```
/// use rabbit_backoff::dead_letters::CheckpointNote;
///
/// let note = CheckpointNote::Written { offset: 41 };
/// assert_eq!(
///     note.to_string(),
///     "checkpoint written at offset 41 of the index: the next read is from the index"
/// );
/// assert_eq!(
///     serde_json::to_value(&note)?,
///     serde_json::json!({ "kind": "written", "offset": 41 })
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CheckpointNote {
    /// The index was read from its checkpoint: the checkpoint's groups,
    /// the entries after its offset, less the tombstones written after it.
    ReadFrom {
        /// The offset of the index's entries stream it stands for.
        offset: u64,
    },
    /// The pass (or the purge) left a checkpoint: the next read starts
    /// from it, and answers from the index when nothing else changed the
    /// queue without the index knowing.
    Written {
        /// The offset of the index's entries stream it stands for.
        offset: u64,
    },
    /// The pass (or the purge) could not leave one; the next read falls
    /// back to a pass again.
    NotWritten {
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for CheckpointNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointNote::ReadFrom { offset } => {
                write!(
                    f,
                    "starting from the checkpoint at offset {offset} of the index"
                )
            }
            CheckpointNote::Written { offset } => write!(
                f,
                "checkpoint written at offset {offset} of the index: the next read is from the index"
            ),
            CheckpointNote::NotWritten { reason } => write!(f, "no checkpoint written: {reason}"),
        }
    }
}
