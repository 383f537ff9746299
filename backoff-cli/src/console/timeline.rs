//! Dead letters per group over time, from `x-failed-at`: counts in buckets
//! of a round size (a minute, an hour, a day…), for the page's chart.

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use rabbit_backoff::parse_failed_at;
use serde::Serialize;

/// Bucket sizes, smallest first.
const STEPS: [u64; 16] = [
    1,
    5,
    15,
    30,
    60,
    5 * 60,
    15 * 60,
    30 * 60,
    3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86_400,
    7 * 86_400,
    30 * 86_400,
    365 * 86_400,
];

/// The most groups drawn apart; the others are summed as one series.
pub const SERIES: usize = 6;

/// Collects failure times one message at a time.
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

/// The chart's data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    /// The start of the first bucket, RFC 3339.
    pub start: Option<String>,
    /// Each bucket's length in seconds.
    pub bucket_secs: u64,
    /// One series per group (the largest ones), then `other`.
    pub series: Vec<Series>,
    /// Messages left out because their `x-failed-at` is missing or unreadable.
    pub undated: usize,
}

/// One group's counts, bucket by bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
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

    /// At most `buckets` buckets of the smallest round size that covers
    /// every point.
    pub fn chart(self, buckets: usize) -> Chart {
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
        let step = STEPS
            .into_iter()
            .find(|step| (last / step - first / step) < buckets as u64)
            .unwrap_or(STEPS[STEPS.len() - 1]);
        let start = first / step * step;
        let len = ((last - start) / step + 1) as usize;
        // The largest groups apart, in order of size.
        let mut order: Vec<usize> = (0..self.names.len()).collect();
        order.sort_by(|&a, &b| self.counts[b].cmp(&self.counts[a]).then(a.cmp(&b)));
        let mut slot = vec![SERIES; self.names.len()];
        for (rank, &group) in order.iter().take(SERIES).enumerate() {
            slot[group] = rank;
        }
        let mut series: Vec<Series> = order
            .iter()
            .take(SERIES)
            .map(|&g| Series {
                group: self.names[g].clone(),
                counts: vec![0; len],
            })
            .collect();
        if order.len() > SERIES {
            series.push(Series {
                group: "other".to_owned(),
                counts: vec![0; len],
            });
        }
        for (group, at) in self.points {
            let bucket = ((at - start) / step) as usize;
            // The groups beyond SERIES have the slot of `other`, the last.
            series[slot[group as usize]].counts[bucket] += 1;
        }
        let start = UNIX_EPOCH + Duration::from_secs(start);
        Chart {
            start: Some(humantime::format_rfc3339_seconds(start).to_string()),
            bucket_secs: step,
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
        let chart = t.chart(48);
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
            t.chart(48)
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
        let chart = t.chart(48);
        assert_eq!(chart.series.len(), SERIES + 1);
        assert_eq!(chart.series[0].group, "g0");
        assert_eq!(chart.series[SERIES].group, "other");
        assert_eq!(chart.series[SERIES].counts, [4 + 3 + 2]);
        assert!(Timeline::default().chart(48).series.is_empty());
    }
}
