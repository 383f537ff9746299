//! The groups of `dlq groups --json` and of the console's groups view: each
//! group's fields as before, `source`, where they were read from,
//! `source_reason`, why, and `index_protocol`, how the index was read.

use rabbit_backoff::dead_letters::IndexProtocol;
use rabbit_backoff::dead_letters::{DeadLetterGroup, GroupReport, GroupSource};
use serde::Serialize;

/// One group with where it was read from (`"index"` or `"pass"`), why
/// ([`GroupReport::reason`]), and over which protocol the index was read
/// (`"stream"`, `"amqp"`, or `null` when it was not read:
/// [`GroupReport::index_protocol`]).
#[derive(Serialize)]
pub struct SourcedGroup<'a> {
    #[serde(flatten)]
    group: &'a DeadLetterGroup,
    source: GroupSource,
    source_reason: String,
    index_protocol: Option<IndexProtocol>,
}

/// The groups of `report`, each with its source.
pub fn sourced(report: &GroupReport) -> Vec<SourcedGroup<'_>> {
    let reason = report.reason();
    report
        .groups
        .iter()
        .map(|group| SourcedGroup {
            group,
            source: report.source,
            source_reason: reason.clone(),
            index_protocol: report.index_protocol(),
        })
        .collect()
}

/// Where the groups were read from, for people: "from the index", or "with
/// a pass over the queue" and why.
pub fn read_from(report: &GroupReport) -> String {
    let read = match (&report.fallback, report.source) {
        (Some(why), GroupSource::Pass) => format!("read with a pass over the queue: {why}"),
        _ => "read from the index".to_owned(),
    };
    match &report.checkpoint {
        Some(note) => format!("{read}; {note}"),
        None => read,
    }
}
