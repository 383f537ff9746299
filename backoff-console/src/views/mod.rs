//! The JSON API's reads, one module per view of the page: GETs that change
//! nothing. A read of a dead-letter queue runs one at a time with the other
//! passes over it, and equal reads in flight share one
//! ([`State::shared_read`](crate::state::State::shared_read)); a read of
//! its replay jobs, one at a time with the other requests about them
//! ([`State::with_replay_log`](crate::state::State::with_replay_log)).

pub(crate) mod audit;
pub(crate) mod body;
pub(crate) mod config;
pub(crate) mod consumers;
pub(crate) mod dead_letters;
pub(crate) mod export;
pub(crate) mod groups;
pub(crate) mod messages;
pub(crate) mod replay_jobs;
pub(crate) mod tiers;

/// The most messages one listing returns.
pub(crate) const MAX_LISTED: usize = 500;
/// How many messages a listing returns unless asked.
pub(crate) const DEFAULT_LISTED: usize = 50;

/// The page's size: `limit`, or [`DEFAULT_LISTED`], at most `max`.
pub(crate) fn listed(limit: Option<usize>, max: usize) -> usize {
    limit.unwrap_or(DEFAULT_LISTED).min(max)
}

/// The key of a read for the reads in flight: the queue and the query.
pub(crate) fn read_key(queue: &str, query: &impl serde::Serialize) -> String {
    // A query is plain fields: it always serializes.
    let query = serde_json::to_string(query).unwrap_or_default();
    format!("{queue}\0{query}")
}
