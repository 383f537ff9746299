//! A purge of a dead-letter queue, and what it did.

use crate::dlq::Dlq;

use serde::Serialize;

use crate::index::checkpoint::{entries_offset, write as write_checkpoint};
use crate::index::checkpoint_note::CheckpointNote;
use crate::index::index::index_exists;

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{channel_error, confirm_channel};

/// What [`Dlq::purge`](crate::Dlq::purge) did.
///
/// ```no_run
/// # async fn demo(dlq: rabbit_backoff::dead_letters::Dlq) -> Result<(), rabbit_backoff::Error> {
/// let report = dlq.purge().await?;
/// println!("purged {}", report.purged);
/// if let Some(note) = &report.checkpoint {
///     println!("{note}");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PurgeReport {
    /// Ready messages removed (unacknowledged ones, held by a consumer or a
    /// pass, stay).
    pub purged: u32,
    /// The empty checkpoint left in the dead-letter index, so that it
    /// answers `groups` again (`None` when there is no index).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointNote>,
}

impl Dlq {
    /// Removes every ready message from the dead-letter queue at once
    /// (`queue.purge`: the broker drops them, no pass), and leaves an empty
    /// checkpoint in the dead-letter index, at the offset its entries'
    /// stream had just before the purge, so that `groups` answers from the
    /// index afterwards instead of finding it out of step. Messages held
    /// unacknowledged (by a consumer or a pass) stay. A dead letter that
    /// arrives between the checkpoint's offset and the purge is purged but
    /// counted by the index; the next read then falls back to a pass, which
    /// writes a checkpoint of its own.
    pub async fn purge(&self) -> Result<PurgeReport, Error> {
        let queue = &self.names.dead_letter_queue;
        let mut offset = None;
        let mut checkpoint = None;
        if index_exists(&*self.connection, &self.names).await? {
            match entries_offset(&*self.connection, &self.names).await {
                Ok(at) => offset = Some(at),
                Err(e) => checkpoint = Some(self.not_written(&e)),
            }
        }
        let channel = confirm_channel(&*self.connection, queue).await?;
        let purged = channel.purge_queue(queue).await;
        channel.close().await;
        let purged = purged.map_err(channel_error(queue, "purging the dead-letter queue"))?;
        if let Some(offset) = offset {
            let removals = self.names.dead_letter_index_removals();
            checkpoint = Some(
                match write_checkpoint(&*self.connection, &removals, offset, Vec::new()).await {
                    Ok(()) => CheckpointNote::Written { offset },
                    Err(e) => self.not_written(&e),
                },
            );
        }
        Ok(PurgeReport { purged, checkpoint })
    }
}
