//! The metrics a test binary's consumers record, read back: one
//! `metrics` recorder a binary, and counters' running totals per consumer.
//! Included with `#[path]` by the tests that read counters.

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
    static TOTALS: OnceLock<Mutex<HashMap<(String, String), u64>>> = OnceLock::new();
    let mut totals = TOTALS.get_or_init(Mutex::default).lock().unwrap();
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        let DebugValue::Counter(n) = value else {
            continue;
        };
        let label = key
            .key()
            .labels()
            .find(|l| l.key() == "consumer")
            .map(|l| l.value().to_owned())
            .unwrap_or_default();
        *totals
            .entry((key.key().name().to_owned(), label))
            .or_default() += n;
    }
    totals
        .get(&(name.to_owned(), consumer.to_owned()))
        .copied()
        .unwrap_or(0)
}
