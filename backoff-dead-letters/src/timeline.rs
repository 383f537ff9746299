//! Dead letters per group over time, from `x-failed-at`: counts in buckets
//! of a round size (a minute, an hour, a day…), for a chart (the web
//! console's). Pure: it counts what it is given, read by any pass.

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use rabbit_backoff_core::parse_failed_at;
use serde::Serialize;

/// Bucket sizes, smallest first: round ones, each at most about twice the
/// one before it (up to a day), so that some size gives between
/// [`MAX_BUCKETS`]` / 2` and [`MAX_BUCKETS`] buckets for any span.
const STEPS: [u64; 24] = [
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    2 * 60,
    5 * 60,
    10 * 60,
    15 * 60,
    30 * 60,
    3600,
    2 * 3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86_400,
    2 * 86_400,
    7 * 86_400,
    14 * 86_400,
    30 * 86_400,
    90 * 86_400,
    365 * 86_400,
];

/// The most buckets a chart has.
pub(crate) const MAX_BUCKETS: u64 = 60;

/// The shortest span a chart shows, in seconds: failures that all fell
/// within less are drawn as narrow bars in the middle of a minute, not as
/// one bar as wide as the chart.
pub(crate) const MIN_SPAN_SECS: u64 = 60;

/// Where a chart's buckets start, how long each is and how many there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Buckets {
    /// The start of the first bucket, in seconds since the epoch (a
    /// multiple of `step`).
    pub(crate) start: u64,
    /// Each bucket's length in seconds.
    pub(crate) step: u64,
    /// How many buckets.
    pub(crate) len: usize,
}

impl Buckets {
    /// The buckets for failures from `first` to `last` (seconds since the
    /// epoch, `first <= last`): the span widened to [`MIN_SPAN_SECS`] around
    /// its middle, then the smallest size of [`STEPS`] that covers it in at
    /// most [`MAX_BUCKETS`] buckets aligned on that size (for any span up to
    /// a day, at least 24 of them).
    pub(crate) fn fitting(first: u64, last: u64) -> Buckets {
        let (first, last) = (first.min(last), first.max(last));
        let span = last - first + 1;
        let (from, to) = if span < MIN_SPAN_SECS {
            let before = (MIN_SPAN_SECS - span) / 2;
            let from = first.saturating_sub(before);
            (from, from + MIN_SPAN_SECS - 1)
        } else {
            (first, last)
        };
        let count = |step: u64| to / step - from / step + 1;
        // Beyond the largest size (a span of over 60 years, from a garbled
        // `x-failed-at`): whole years, as many as it takes.
        let year = STEPS[STEPS.len() - 1];
        let step = STEPS
            .into_iter()
            .find(|&step| count(step) <= MAX_BUCKETS)
            .unwrap_or_else(|| (to - from).div_ceil(MAX_BUCKETS - 2).next_multiple_of(year));
        Buckets {
            start: from / step * step,
            step,
            len: count(step) as usize,
        }
    }

    /// The bucket of the instant `at` (within the span it was made for).
    fn of(&self, at: u64) -> usize {
        ((at - self.start) / self.step) as usize
    }
}

/// The most groups drawn apart; the others are summed as one series.
pub(crate) const SERIES: usize = 6;

/// Collects failure times one message at a time, then counts them per
/// group in buckets of a round size ([`Timeline::chart`]).
///
/// ```
/// use rabbit_backoff::dead_letters::Timeline;
///
/// let mut timeline = Timeline::default();
/// timeline.add("a1b2c3d4e5f6", Some("2026-12-02T10:40:05Z"));
/// timeline.add("a1b2c3d4e5f6", Some("2026-12-02T10:55:00Z"));
/// timeline.add("0123456789ab", None);
/// let chart = timeline.chart();
/// assert_eq!(chart.bucket_secs, 30, "15 minutes in half minutes");
/// assert_eq!(chart.series[0].group, "a1b2c3d4e5f6");
/// assert_eq!(chart.series[0].counts.iter().sum::<u32>(), 2);
/// assert_eq!(chart.undated, 1);
/// ```
#[derive(Debug, Default)]
pub struct Timeline {
    /// (group index, seconds since the epoch)
    points: Vec<(u32, u64)>,
    groups: HashMap<String, u32>,
    names: Vec<String>,
    counts: Vec<usize>,
    /// Messages without a readable `x-failed-at`.
    undated: usize,
}

/// The chart's data: per group, its dead letters in each bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    /// The start of the first bucket, RFC 3339.
    pub start: Option<String>,
    /// Each bucket's length in seconds.
    pub bucket_secs: u64,
    /// One series per group (the largest ones), then `other`.
    pub series: Vec<ChartSeries>,
    /// Messages left out because their `x-failed-at` is missing or unreadable.
    pub undated: usize,
}

/// One group's counts, bucket by bucket (`other`: the smaller groups summed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChartSeries {
    /// The group's id, or `other`.
    pub group: String,
    /// Dead letters per bucket.
    pub counts: Vec<u32>,
}

impl Timeline {
    /// Counts one dead letter of `group` that failed at `failed_at`.
    pub fn add(&mut self, group: &str, failed_at: Option<&str>) {
        let Some(at) = failed_at
            .and_then(parse_failed_at)
            .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
        else {
            self.undated += 1;
            return;
        };
        let index = match self.groups.get(group) {
            Some(&i) => i,
            None => {
                let i = self.names.len() as u32;
                self.groups.insert(group.to_owned(), i);
                self.names.push(group.to_owned());
                self.counts.push(0);
                i
            }
        };
        self.counts[index as usize] += 1;
        self.points.push((index, at.as_secs()));
    }

    /// The counts per group in round buckets (a minute, an hour, a day…)
    /// that cover the span of the failures.
    pub fn chart(self) -> Chart {
        let (Some(first), Some(last)) = (
            self.points.iter().map(|p| p.1).min(),
            self.points.iter().map(|p| p.1).max(),
        ) else {
            return Chart {
                start: None,
                bucket_secs: 60,
                series: Vec::new(),
                undated: self.undated,
            };
        };
        let buckets = Buckets::fitting(first, last);
        let len = buckets.len;
        // The largest groups apart, in order of size.
        let mut order: Vec<usize> = (0..self.names.len()).collect();
        order.sort_by(|&a, &b| self.counts[b].cmp(&self.counts[a]).then(a.cmp(&b)));
        let mut slot = vec![SERIES; self.names.len()];
        for (rank, &group) in order.iter().take(SERIES).enumerate() {
            slot[group] = rank;
        }
        let mut series: Vec<ChartSeries> = order
            .iter()
            .take(SERIES)
            .map(|&g| ChartSeries {
                group: self.names[g].clone(),
                counts: vec![0; len],
            })
            .collect();
        if order.len() > SERIES {
            series.push(ChartSeries {
                group: "other".to_owned(),
                counts: vec![0; len],
            });
        }
        for (group, at) in self.points {
            let bucket = buckets.of(at);
            // The groups beyond SERIES have the slot of `other`, the last.
            series[slot[group as usize]].counts[bucket] += 1;
        }
        let start = UNIX_EPOCH + Duration::from_secs(buckets.start);
        Chart {
            start: Some(humantime::format_rfc3339_seconds(start).to_string()),
            bucket_secs: buckets.step,
            series,
            undated: self.undated,
        }
    }
}

/// Seconds since the epoch, for tests.
#[cfg(test)]
fn at(secs: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_group_in_round_buckets() {
        let mut t = Timeline::default();
        let base = 1_796_208_000; // 2026-12-02T10:40:00Z
        t.add("a", Some(&at(base + 5)));
        t.add("a", Some(&at(base + 65)));
        t.add("b", Some(&at(base + 70)));
        t.add("a", Some(&at(base + 30 * 60)));
        t.add("b", Some("not a time"));
        t.add("b", None);
        let chart = t.chart();
        assert_eq!(chart.bucket_secs, 60, "31 minutes in minutes");
        assert_eq!(chart.start.as_deref(), Some("2026-12-02T10:40:00Z"));
        assert_eq!(chart.undated, 2);
        assert_eq!(chart.series.len(), 2);
        assert_eq!(chart.series[0].group, "a");
        assert_eq!(chart.series[0].counts.len(), 31);
        assert_eq!(chart.series[0].counts[0], 1);
        assert_eq!(chart.series[0].counts[1], 1);
        assert_eq!(chart.series[0].counts[30], 1);
        assert_eq!(chart.series[1].counts[1], 1);
        let hours = {
            let mut t = Timeline::default();
            t.add("a", Some(&at(base)));
            t.add("a", Some(&at(base + 20 * 3600)));
            t.chart()
        };
        assert_eq!(hours.bucket_secs, 30 * 60, "20 hours in half hours");
        assert_eq!(hours.series[0].counts.len(), 41);
        assert_eq!(hours.series[0].counts.iter().sum::<u32>(), 2);
    }

    #[test]
    fn sums_small_groups_as_other() {
        let mut t = Timeline::default();
        for g in 0..SERIES + 3 {
            for _ in 0..=(SERIES + 3 - g) {
                t.add(&format!("g{g}"), Some(&at(1_796_208_000)));
            }
        }
        let chart = t.chart();
        assert_eq!(chart.series.len(), SERIES + 1);
        assert_eq!(chart.series[0].group, "g0");
        assert_eq!(chart.series[SERIES].group, "other");
        let other = &chart.series[SERIES].counts;
        assert_eq!(other.iter().sum::<u32>(), 4 + 3 + 2);
        assert!(Timeline::default().chart().series.is_empty());
    }

    const DAY: u64 = 86_400;
    const BASE: u64 = 1_796_208_000; // 2026-12-02T10:40:00Z

    /// Every instant of `first..=last` falls in one of the buckets.
    fn covers(b: Buckets, first: u64, last: u64) -> bool {
        b.start <= first && last < b.start + b.step * b.len as u64
    }

    #[test]
    fn an_empty_timeline_has_no_buckets() {
        let chart = Timeline::default().chart();
        assert_eq!(chart.start, None);
        assert!(chart.series.is_empty());
        assert_eq!(chart.undated, 0);
    }

    #[test]
    fn one_failure_is_a_narrow_bar_in_the_middle_of_a_minute() {
        let b = Buckets::fitting(BASE + 17, BASE + 17);
        assert_eq!(b.step, 1);
        assert_eq!(b.len, MIN_SPAN_SECS as usize);
        assert!(covers(b, BASE + 17, BASE + 17));
        let bar = (BASE + 17 - b.start) as usize;
        assert!(
            (25..35).contains(&bar),
            "in the middle, not at an edge: {bar}"
        );

        let mut t = Timeline::default();
        t.add("a", Some(&at(BASE + 17)));
        let chart = t.chart();
        assert_eq!(chart.bucket_secs, 1);
        let counts = &chart.series[0].counts;
        assert_eq!(counts.len(), 60);
        assert_eq!(counts.iter().filter(|&&n| n > 0).count(), 1, "{counts:?}");
        assert_eq!(counts[bar], 1);
    }

    #[test]
    fn a_burst_within_one_second_fills_one_bucket_of_sixty() {
        let mut t = Timeline::default();
        for group in ["a", "b", "a", "a"] {
            t.add(group, Some(&format!("{}.{}Z", &at(BASE)[..19], 250)));
        }
        let chart = t.chart();
        assert_eq!(chart.bucket_secs, 1);
        for series in &chart.series {
            assert_eq!(
                series.counts.len(),
                60,
                "not one bucket as wide as the chart"
            );
            assert_eq!(series.counts.iter().filter(|&&n| n > 0).count(), 1);
        }
        assert_eq!(chart.series[0].counts.iter().sum::<u32>(), 3);
    }

    #[test]
    fn the_bucket_size_fits_the_span() {
        // (span in seconds, the size expected)
        for (span, step) in [
            (0, 1),
            (59, 1),
            (60, 2),
            (5 * 60, 10),
            (31 * 60, 60),
            (3600, 2 * 60),
            (2 * 3600, 5 * 60),
            (20 * 3600, 30 * 60),
            (DAY, 30 * 60),
            (3 * DAY, 2 * 3600),
            (40 * DAY, DAY),
            (30 * 365 * DAY, 365 * DAY),
            (8000 * 365 * DAY, 138 * 365 * DAY),
        ] {
            let b = Buckets::fitting(BASE, BASE + span);
            assert_eq!(b.step, step, "a span of {span} s");
            assert!(covers(b, BASE, BASE + span), "{span}: {b:?}");
            assert_eq!(b.start % b.step, 0, "aligned: {b:?}");
            assert!(b.len as u64 <= MAX_BUCKETS, "{span}: {b:?}");
            if span < 1000 * 365 * DAY {
                assert!(b.len >= 20, "a span of {span} s in {} buckets", b.len);
            }
        }
    }

    #[test]
    fn a_span_of_days_is_counted_in_hours() {
        let mut t = Timeline::default();
        t.add("a", Some(&at(BASE)));
        t.add("a", Some(&at(BASE + 3 * DAY)));
        t.add("b", Some(&at(BASE + DAY + 1)));
        let chart = t.chart();
        assert_eq!(chart.bucket_secs, 2 * 3600);
        assert!((30..=60).contains(&chart.series[0].counts.len()));
        assert_eq!(chart.series[0].counts.iter().sum::<u32>(), 2);
        assert_eq!(chart.series[1].counts.iter().sum::<u32>(), 1);
    }

    #[test]
    fn every_span_gets_between_half_and_all_of_the_buckets() {
        let mut span = 60;
        while span < 300 * DAY {
            let b = Buckets::fitting(BASE, BASE + span);
            assert!(covers(b, BASE, BASE + span), "{span}: {b:?}");
            assert!(b.len as u64 <= MAX_BUCKETS, "{span}: {b:?}");
            if b.step < DAY {
                assert!(b.len as u64 >= MAX_BUCKETS / 2 - 6, "{span}: {b:?}");
            }
            span = span * 9 / 8;
        }
    }
}
