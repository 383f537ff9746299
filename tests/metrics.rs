//! The metrics of a known mix of outcomes equal its counts. Its own test
//! binary: it installs the process-wide recorder.

mod common;

use std::time::Duration;

use common::*;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use rabbit_backoff::meters;

#[tokio::test]
async fn a_known_mix_gives_the_same_counts() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this process");

    let running = Running::start("metrics", |_| {}).await;
    let publisher = publisher().await;
    for id in 0..70 {
        running
            .publish(&publisher, &Job::new(id, Fail::None, None))
            .await;
    }
    for id in 100..120 {
        running
            .publish(&publisher, &Job::new(id, Fail::Transient, Some(1)))
            .await;
    }
    for id in 200..210 {
        running
            .publish(&publisher, &Job::new(id, Fail::Permanent, None))
            .await;
    }
    let (channel_connection, channel) = channel().await;
    let dlq = running.spec.names().dead_letter_queue;
    eventually("every message settled", Duration::from_secs(30), || {
        (0..70)
            .chain(100..120)
            .all(|id| running.journal.reached(id, 0))
            && (100..120).all(|id| running.journal.reached(id, 1))
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while depth(&channel, &dlq).await < 10 {
        assert!(
            std::time::Instant::now() < deadline,
            "the permanent ones dead-lettered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queue = running.spec.queue.clone();
    let _cleanup = running.stop().await;
    let _ = channel_connection.close(200, "".into()).await;

    let mut counters = std::collections::BTreeMap::new();
    let mut durations = 0;
    let mut in_flight = None;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        if !labels.contains(&format!("consumer={queue}")) {
            continue;
        }
        let name = key.name().to_owned();
        match value {
            DebugValue::Counter(n) => {
                counters.insert(format!("{name}{{{}}}", labels.join(",")), n);
            }
            DebugValue::Histogram(values) if name == meters::HANDLER_DURATION => {
                durations = values.len();
            }
            DebugValue::Gauge(v) if name == meters::IN_FLIGHT => in_flight = Some(v.into_inner()),
            _ => {}
        }
    }
    let count = |name: &str, extra: &str| {
        let key = if extra.is_empty() {
            format!("{name}{{consumer={queue}}}")
        } else {
            format!("{name}{{consumer={queue},{extra}}}")
        };
        counters
            .get(&key)
            .copied()
            .unwrap_or_else(|| panic!("{key} in {counters:#?}"))
    };
    assert_eq!(
        count(meters::HANDLED, ""),
        90,
        "70 at once, 20 after one retry"
    );
    assert_eq!(count(meters::RETRIED, "delay=100ms"), 20);
    assert_eq!(count(meters::RETRIED, "delay=200ms"), 0);
    assert_eq!(count(meters::DEAD_LETTERED, "reason=permanent"), 10);
    assert_eq!(count(meters::DEAD_LETTERED, "reason=exhausted"), 0);
    assert_eq!(count(meters::DISCARDED, ""), 0);
    assert_eq!(durations, 70 + 40 + 10, "one duration per handler call");
    assert_eq!(in_flight, Some(0.0));
}
