//! The in-memory broker of `rabbit_backoff::testing` under the framework's
//! own consumer: messages per second through the success path in one
//! process (S1), the same with a Prometheus recorder installed, and the wall
//! time of a `5s,15s,60s` exhaustion on paused time. Without a broker's I/O,
//! the framework's own cost per message is all there is to measure, so the
//! recorder's share shows here at its largest.
//!
//! `cargo bench --bench in_memory` (`BENCH_N` messages, default 200 000);
//! under `cargo test` it runs once with 2 000 messages, as a test.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rabbit_backoff::prelude::*;
use rabbit_backoff::testing::TestBroker;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Job {
    id: u64,
    fail: bool,
}

#[derive(Debug, thiserror::Error, Classify)]
enum JobError {
    #[error("dependency unavailable")]
    Unavailable,
}

#[derive(Default)]
struct Done(AtomicU64);

#[backoff_consumer(queue = "jobs", delays = "5s,15s,60s", prefetch = 100)]
async fn job(job: Job, done: State<Done>) -> Result<(), JobError> {
    if job.fail {
        return Err(JobError::Unavailable);
    }
    done.0.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

async fn start(broker: &TestBroker, done: &Arc<Done>) -> rabbit_backoff::RunningRuntime {
    Runtime::builder()
        .transport(broker.clone())
        .state_arc(Arc::clone(done))
        .handle_signals(false)
        .consumer(job)
        .start()
        .await
        .expect("starts")
}

/// A fresh broker with [`job`] running on it, counting in its `Done`, and
/// the moment it started.
async fn started() -> (
    TestBroker,
    Arc<Done>,
    rabbit_backoff::RunningRuntime,
    Instant,
) {
    let broker = TestBroker::new();
    let done = Arc::new(Done::default());
    let running = start(&broker, &done).await;
    (broker, done, running, Instant::now())
}

fn success_path(n: u64) -> f64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (broker, done, running, started) = started().await;
        for id in 0..n {
            broker
                .publish_json("jobs", "jobs", &Job { id, fail: false })
                .await;
        }
        while done.0.load(Ordering::Relaxed) < n {
            tokio::task::yield_now().await;
        }
        let rate = n as f64 / started.elapsed().as_secs_f64();
        running.stop().await.expect("stops");
        rate
    })
}

fn exhaustion_wall_time() -> Duration {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (broker, _done, running, started) = started().await;
        broker
            .publish_json("jobs", "jobs", &Job { id: 1, fail: true })
            .await;
        broker.run_until_idle().await;
        let wall = started.elapsed();
        let dead = broker.dead_letters("jobs.dlq");
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].retry_count(), 3);
        running.stop().await.expect("stops");
        wall
    })
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full {
        std::env::var("BENCH_N")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200_000)
    } else {
        2_000
    };
    // Without a recorder first, then with one: a recorder cannot be
    // uninstalled, so the sides cannot alternate in one process; the first
    // run also warms up, which favours the second side if anything.
    let before = success_path(n);
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder of this process");
    let with = success_path(n);
    assert!(
        handle
            .render()
            .contains("rabbit_backoff_messages_handled_total")
    );
    println!(
        "in-memory success path (S1): {n} messages through the framework consumer: \
         {before:.0} msg/s without a metrics recorder, {with:.0} msg/s with a Prometheus one ({:.2}×)",
        with / before
    );
    let wall = exhaustion_wall_time();
    println!(
        "in-memory exhaustion through 5s,15s,60s (80 s of virtual time): {:.1} ms of wall time",
        wall.as_secs_f64() * 1_000.0
    );
}
