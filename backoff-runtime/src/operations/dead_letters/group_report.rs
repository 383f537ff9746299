//! The groups of a dead-letter queue, and where they were read from.

use serde::Serialize;

use crate::operations::dead_letters::checkpoint_note::CheckpointNote;
use crate::operations::dead_letters::group::DeadLetterGroup;
use crate::operations::dead_letters::index_fallback::IndexFallback;

/// What [`Dlq::group_report`](crate::Dlq::group_report) read.
///
/// ```
/// use rabbit_backoff::GroupSource;
///
/// assert_eq!(serde_json::to_string(&GroupSource::Index)?, "\"index\"");
/// assert_eq!(GroupSource::Pass.as_str(), "pass");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupSource {
    /// The dead-letter index: its streams, without touching the queue.
    Index,
    /// A pass over the dead-letter queue.
    Pass,
}

impl GroupSource {
    /// `index` or `pass`.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupSource::Index => "index",
            GroupSource::Pass => "pass",
        }
    }
}

/// The groups of a dead-letter queue, with where they were read from.
///
/// ```no_run
/// # async fn demo(dlq: rabbit_backoff::Dlq) -> Result<(), rabbit_backoff::Error> {
/// use rabbit_backoff::{DeadLetterFilter, GroupSource};
///
/// let report = dlq.group_report(&DeadLetterFilter::default()).await?;
/// if let Some(why) = &report.fallback {
///     println!("read the queue: {why}");
/// }
/// assert_eq!(report.source == GroupSource::Pass, report.fallback.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupReport {
    /// The groups, largest first.
    pub groups: Vec<DeadLetterGroup>,
    /// Where they were read from.
    pub source: GroupSource,
    /// Why the index was not read (`None` when it was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<IndexFallback>,
    /// The index's checkpoint: the one an index read started from, or the
    /// one a pass left because the index was out of step (or why it could
    /// not); `None` when none was involved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointNote>,
}

impl GroupReport {
    /// Where the groups were read from and why, in a few words.
    ///
    /// ```
    /// use rabbit_backoff::{CheckpointNote, GroupReport, GroupSource, IndexFallback};
    ///
    /// let report = GroupReport {
    ///     groups: Vec::new(),
    ///     source: GroupSource::Pass,
    ///     fallback: Some(IndexFallback::CountMismatch { indexed: 40, depth: 10 }),
    ///     checkpoint: Some(CheckpointNote::Written { offset: 52 }),
    /// };
    /// assert_eq!(
    ///     report.reason(),
    ///     "index out of step: 40 live entries, 10 messages; \
    ///      checkpoint written at offset 52 of the index: the next read is from the index"
    /// );
    /// ```
    pub fn reason(&self) -> String {
        let why = match (self.source, &self.fallback) {
            (GroupSource::Index, _) | (GroupSource::Pass, None) => "from the index".to_owned(),
            (GroupSource::Pass, Some(IndexFallback::CountMismatch { indexed, depth })) => {
                format!("index out of step: {indexed} live entries, {depth} messages")
            }
            (GroupSource::Pass, Some(IndexFallback::Absent)) => "no index".to_owned(),
            (GroupSource::Pass, Some(why)) => why.to_string(),
        };
        match &self.checkpoint {
            Some(note) => format!("{why}; {note}"),
            None => why,
        }
    }
}
