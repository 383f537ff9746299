//! One side consuming a run's messages in this process until every one is
//! handled or dead-lettered, and what it did ([`Run`]).

use lapin::Channel;
use rabbit_backoff_core::ConsumerSpec;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::measure::{cpu_time, measured_span_ends, measured_span_starts};
use crate::names::Names;
use crate::scenario::Scenario;
use crate::side::Side;
use crate::sides::start;
use crate::target::{Target, closed, connect};
use crate::work::{Kind, Tally};

/// The depth of `queue`, by a passive declare on `channel` (one channel for
/// the whole run: opening one per poll cost more CPU than a message).
pub(crate) async fn depth(channel: &Channel, queue: &str) -> u32 {
    rabbit_backoff_test_support::declare::passive(channel, queue)
        .await
        .message_count()
}

/// What one side did with a run's messages.
pub(crate) struct Run {
    /// Seconds from the first delivery to the last message settled.
    pub(crate) elapsed: f64,
    /// The consumer's CPU seconds over that span (from the consumer's start).
    pub(crate) cpu: f64,
    /// Messages neither handled nor dead-lettered, or handled when they
    /// should have been dead-lettered.
    pub(crate) lost: usize,
    /// Handler runs past the first for one message.
    pub(crate) duplicates: usize,
    /// Messages in the dead-letter queue at the end.
    pub(crate) dead: usize,
}

/// Runs `side` over the run's messages in this process until every one is
/// handled or dead-lettered, and checks them.
pub(crate) async fn consume(
    target: &Target,
    side: Side,
    scenario: Scenario,
    n: usize,
    spec: &ConsumerSpec,
) -> Run {
    let admin = connect(target).await;
    let expected_dead = scenario.permanent_among(n as u64);
    let expected_ok = n - expected_dead;
    let poll_channel = admin.create_channel().await.expect("channel");
    let tally = Arc::new(Tally::new(n));
    measured_span_starts();
    let cpu_before = cpu_time();
    let names = Names::of(side, spec);
    let (stop, task) = start(target, side, spec, &names, &tally).await;
    let dlq = &names.dlq;
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut dead = 0;
    loop {
        if tally.ok.load(Ordering::Relaxed) == expected_ok {
            dead = depth(&poll_channel, dlq).await as usize;
            if dead == expected_dead {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "run did not settle: {} ok, {dead} dead",
            tally.ok.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ended = Instant::now();
    let cpu = cpu_time() - cpu_before;
    measured_span_ends();
    stop.shutdown();
    task.await.expect("the consumer task ends");
    closed(admin.close(200, "".into())).await;

    // Every message handled or dead-lettered, none lost.
    let lost = (0..n as u64)
        .filter(|&id| {
            let handled = tally.handled[id as usize].load(Ordering::Relaxed);
            match (scenario.kind)(id) {
                Kind::Permanent => handled != 0,
                _ => handled == 0,
            }
        })
        .count();
    let duplicates = tally
        .handled
        .iter()
        .map(|h| h.load(Ordering::Relaxed).saturating_sub(1) as usize)
        .sum();
    let first = *tally.first.get().expect("at least one delivery");
    Run {
        elapsed: (ended - first).as_secs_f64(),
        cpu: cpu.as_secs_f64(),
        lost,
        duplicates,
        dead,
    }
}
