//! Where the groups of `dlq groups` were read from, in words (its JSON is
//! the console's groups view: `rabbit_backoff::dead_letters::SourcedGroup`).

use rabbit_backoff::dead_letters::{GroupReport, GroupSource};

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
