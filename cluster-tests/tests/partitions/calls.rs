//! The handler's calls over a run, read back: the longest pause in
//! handling, and calls and confirms second by second.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

/// The longest time without a handler call from `from` to the last call
/// before `to` (a run that lost messages waits for them until its deadline:
/// that wait is not a pause in handling).
pub(crate) fn longest_pause(calls: &[(u64, u32, Instant)], from: Instant, to: Instant) -> Duration {
    let mut at: Vec<Instant> = calls
        .iter()
        .map(|c| c.2)
        .filter(|&t| t >= from && t <= to)
        .collect();
    at.sort();
    let mut edges = vec![from];
    edges.extend(at);
    edges
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

/// Handler calls and confirms per second from 5 s before the fault to `to`
/// (`PARTITION_TIMELINE=1` prints it), to see where a pause was.
pub(crate) fn timeline(
    calls: &[(u64, u32, Instant)],
    confirmed: &BTreeMap<u64, Instant>,
    fault_at: Instant,
    to: Instant,
) -> String {
    let start = fault_at - Duration::from_secs(5);
    let seconds = (to.saturating_duration_since(start).as_secs() + 1) as usize;
    let mut handled = vec![0; seconds];
    let mut confirms = vec![0; seconds];
    let slot = |t: Instant| {
        t.checked_duration_since(start)
            .map(|d| d.as_secs() as usize)
            .filter(|&s| s < seconds)
    };
    for &(_, _, at) in calls {
        if let Some(s) = slot(at) {
            handled[s] += 1;
        }
    }
    for &at in confirmed.values() {
        if let Some(s) = slot(at) {
            confirms[s] += 1;
        }
    }
    (0..seconds)
        .map(|s| {
            format!(
                "{:+}s: {} calls, {} confirms",
                s as i64 - 5,
                handled[s],
                confirms[s]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
