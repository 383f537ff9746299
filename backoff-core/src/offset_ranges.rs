//! Splitting a span of stream offsets into ranges read at once.

use std::ops::Range;

/// The offsets `start..end` split into at most `n` contiguous ranges, in
/// order, none shorter than `min` offsets (so a short span is one range),
/// the longer ones first by one offset at most. An empty span gives one
/// empty range, so that a reader still finds where the stream ends.
///
/// ```
/// use rabbit_backoff_core::split_offsets;
///
/// assert_eq!(split_offsets(10, 20, 2, 1), [10..15, 15..20]);
/// assert_eq!(split_offsets(0, 7, 3, 1), [0..3, 3..5, 5..7]);
/// // Ranges of at least 5: one.
/// assert_eq!(split_offsets(0, 9, 4, 5), [0..9]);
/// assert_eq!(split_offsets(5, 5, 2, 1), [5..5]);
/// ```
pub fn split_offsets(start: u64, end: u64, n: usize, min: u64) -> Vec<Range<u64>> {
    let span = end.saturating_sub(start);
    let most = (span / min.max(1)).max(1);
    let n = (n.max(1) as u64).min(most);
    let (each, longer) = (span / n, span % n);
    let mut ranges = Vec::with_capacity(n as usize);
    let mut from = start;
    for i in 0..n {
        let to = from + each + u64::from(i < longer);
        ranges.push(from..to);
        from = to;
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_ranges_cover_the_span_in_order(
            start in 0u64..1_000_000,
            span in 0u64..100_000,
            n in 0usize..9,
            min in 0u64..20_000,
        ) {
            let ranges = split_offsets(start, start + span, n, min);
            prop_assert!(!ranges.is_empty() && ranges.len() <= n.max(1));
            prop_assert_eq!(ranges[0].start, start);
            prop_assert_eq!(ranges[ranges.len() - 1].end, start + span);
            for pair in ranges.windows(2) {
                prop_assert_eq!(pair[0].end, pair[1].start);
            }
            if ranges.len() > 1 {
                prop_assert!(ranges.iter().all(|r| r.end - r.start >= min.max(1)));
            }
        }
    }
}
