//! A dead-letter group with where it was read from: a view of a
//! [`GroupReport`] for its JSON, the items of the console's groups view and
//! of `rabbit-backoff dlq groups --json`.

use serde::Serialize;

use crate::group::DeadLetterGroup;
use crate::group_report::{GroupReport, GroupSource};
use crate::index::index_protocol::IndexProtocol;

/// One group with where it was read from (`"index"` or `"pass"`), why
/// ([`GroupReport::reason`]), and over which protocol the index was read
/// (`"stream"`, `"amqp"`, or `null` when it was not read:
/// [`GroupReport::index_protocol`]). Its JSON is the group's own fields
/// with `source`, `source_reason` and `index_protocol` beside them.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct SourcedGroup {
    /// The group.
    #[serde(flatten)]
    pub group: DeadLetterGroup,
    /// Where it was read from.
    pub source: GroupSource,
    /// Why, in a few words.
    pub source_reason: String,
    /// How the index was read, when it was.
    pub index_protocol: Option<IndexProtocol>,
}

impl SourcedGroup {
    /// The groups of `report`, each with its source.
    pub fn all(report: &GroupReport) -> Vec<SourcedGroup> {
        let reason = report.reason();
        report
            .groups
            .iter()
            .map(|group| SourcedGroup {
                group: group.clone(),
                source: report.source,
                source_reason: reason.clone(),
                index_protocol: report.index_protocol(),
            })
            .collect()
    }
}
