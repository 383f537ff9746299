//! What a purge of a dead-letter queue did.

use serde::Serialize;

use crate::operations::dead_letters::checkpoint_note::CheckpointNote;

/// What [`Dlq::purge`](crate::Dlq::purge) did.
///
/// ```no_run
/// # async fn demo(dlq: rabbit_backoff::Dlq) -> Result<(), rabbit_backoff::Error> {
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
