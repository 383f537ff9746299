//! Replaying a dead letter: where it goes and the replay history its
//! headers keep.

use crate::headers;

/// The most `x-replay-history` entries a replayed message keeps: the newest.
/// `x-replay-count` still counts every replay, so a message replayed 50 times
/// says so with 10 entries, and its headers stay bounded however often it is
/// replayed.
pub const REPLAY_HISTORY_LIMIT: usize = 10;

/// How many of the oldest history entries a replay drops, when the history
/// held `entries` before the replay added its own.
///
/// ```
/// use rabbit_backoff_core::{history_overflow, REPLAY_HISTORY_LIMIT};
/// assert_eq!(history_overflow(3), 0);
/// assert_eq!(history_overflow(REPLAY_HISTORY_LIMIT), 1);
/// assert_eq!(history_overflow(25), 16);
/// ```
pub fn history_overflow(entries: usize) -> usize {
    (entries + 1).saturating_sub(REPLAY_HISTORY_LIMIT)
}

/// The failure headers a replay moves into the history and removes, so that
/// the replayed message starts again from the first retry tier.
pub const FAILURE_HEADERS: [&str; 8] = [
    headers::ERROR,
    headers::FAILED_AT,
    headers::FIRST_FAILED_AT,
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
/// use rabbit_backoff_core::replay_target;
/// assert_eq!(replay_target(Some("orders"), "fallback"), ("".to_owned(), "orders".to_owned()));
/// assert_eq!(replay_target(None, "orders"), ("".to_owned(), "orders".to_owned()));
/// ```
pub fn replay_target(original_queue: Option<&str>, work_queue: &str) -> (String, String) {
    let queue = original_queue
        .filter(|q| !q.is_empty())
        .unwrap_or(work_queue);
    (String::new(), queue.to_owned())
}
