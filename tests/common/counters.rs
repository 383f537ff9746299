//! The metrics a test binary's consumers record, read back: one
//! `metrics` recorder a binary, and counters' running totals per consumer.
//! Included with `#[path]` by the tests that read counters.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// The recorder of this test binary, installed on first use.
pub fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        snapshotter
    })
}

/// A counter's total for one consumer. A snapshot resets the recorder's
/// counters, so every snapshot adds what it read to running totals.
pub fn counter(name: &str, consumer: &str) -> u64 {
    counter_with(name, &[("consumer", consumer)])
}

/// A counter's total over the series that carry every label of `labels`.
pub fn counter_with(name: &str, labels: &[(&str, &str)]) -> u64 {
    type Series = (String, Vec<(String, String)>);
    static TOTALS: OnceLock<Mutex<HashMap<Series, u64>>> = OnceLock::new();
    let mut totals = TOTALS.get_or_init(Mutex::default).lock().unwrap();
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        let DebugValue::Counter(n) = value else {
            continue;
        };
        let series = key
            .key()
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        *totals
            .entry((key.key().name().to_owned(), series))
            .or_default() += n;
    }
    totals
        .iter()
        .filter(|((metric, series), _)| {
            metric == name
                && labels
                    .iter()
                    .all(|(k, v)| series.iter().any(|(sk, sv)| sk == k && sv == v))
        })
        .map(|(_, n)| n)
        .sum()
}
