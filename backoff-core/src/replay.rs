use crate::headers;

/// A header of the replay history (`x-replay-history`): one entry per replay,
/// so that a replayed message still says why it failed before.
pub const REPLAY_HISTORY: &str = "x-replay-history";
/// When the message was last replayed, RFC 3339 in UTC.
pub const REPLAYED_AT: &str = "x-replayed-at";

/// The failure headers a replay moves into the history and removes, so that
/// the replayed message starts again from the first retry tier.
pub const FAILURE_HEADERS: [&str; 7] = [
    headers::ERROR,
    headers::FAILED_AT,
    headers::DEAD_LETTER_REASON,
    headers::RETRY_COUNT,
    headers::ORIGINAL_QUEUE,
    headers::ORIGINAL_EXCHANGE,
    headers::ORIGINAL_ROUTING_KEY,
];

/// Where a replayed message goes when no target is given: straight to the
/// work queue it failed in, through the default exchange, so that a shared
/// fanout or topic work exchange does not deliver it to other queues again.
///
/// ```
/// use backoff_core::replay_target;
/// assert_eq!(replay_target(Some("orders"), "fallback"), ("".to_owned(), "orders".to_owned()));
/// assert_eq!(replay_target(None, "orders"), ("".to_owned(), "orders".to_owned()));
/// ```
pub fn replay_target(original_queue: Option<&str>, work_queue: &str) -> (String, String) {
    let queue = original_queue
        .filter(|q| !q.is_empty())
        .unwrap_or(work_queue);
    (String::new(), queue.to_owned())
}
