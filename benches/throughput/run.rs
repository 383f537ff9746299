//! One run of one side over one scenario's messages: published, consumed
//! until each is handled or dead-lettered, checked, measured.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::future::join_all;
use lapin::options::{BasicGetOptions, BasicPublishOptions};
use lapin::{BasicProperties, Channel, Connection};
use rabbit_backoff::prelude::*;
use rabbit_backoff_core::ConsumerSpec;

use crate::broker_process;
use crate::consume::consume;
use crate::env_or;
use crate::measure::rss_kib;
use crate::names::Names;
use crate::process::{broker_pid, in_child, processes};
use crate::say::say;
use crate::scenario::{SCENARIOS, Scenario};
use crate::side::Side;
use crate::sides::dedupe::forget_keys;
use crate::sides::start;
use crate::target::{Target, closed, connect};
use crate::topology::{declare, delete};
use crate::work::{Msg, Tally, framework};

pub(crate) struct Sample {
    pub(crate) rate: f64,
    pub(crate) cpu_us: f64,
    /// The broker's CPU per message, when its process was found.
    pub(crate) broker_us: Option<f64>,
    pub(crate) duplicates: usize,
}

/// Publishes messages `ids` of `scenario` to the work exchange of
/// `names`, persistent, with pipelined confirms.
pub(crate) async fn prepublish(
    channel: &Channel,
    names: &Names,
    scenario: Scenario,
    ids: std::ops::Range<u64>,
) {
    let ids: Vec<u64> = ids.collect();
    for chunk in ids.chunks(1000) {
        let mut confirms = Vec::with_capacity(chunk.len());
        for &id in chunk {
            let body = serde_json::to_vec(&Msg {
                id,
                kind: (scenario.kind)(id),
            })
            .expect("encode");
            let confirm = channel
                .basic_publish(
                    names.exchange.as_str().into(),
                    names.routing_key.as_str().into(),
                    BasicPublishOptions::default(),
                    &body,
                    BasicProperties::default()
                        .with_delivery_mode(2)
                        .with_message_id(id.to_string().into())
                        .with_content_type("application/json".into()),
                )
                .await
                .expect("publish");
            confirms.push(confirm);
        }
        for confirm in join_all(confirms).await {
            assert!(
                confirm.expect("confirm").is_ack(),
                "the broker took every message"
            );
        }
    }
}

/// The spec of a run of `side`: the framework's, with a queue name unique
/// to the run (on a hand-written side, the prefix of the article's names),
/// the target's queue type and what the side changes.
pub(crate) fn spec_for(target: &Target, prefetch: u16, side: Side) -> ConsumerSpec {
    let mut spec = framework.spec().with_prefetch(prefetch);
    spec.queue = format!("bench.{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    spec.queue_type = Some(target.queue_type);
    side.configure(&mut spec);
    spec
}

/// Reads up to 20 of the run's dead letters (`basic.get` without an ack:
/// the queue is deleted next) and checks that each carries the article's
/// three headers, which a tool reading the dead letters of either side
/// relies on: what is wrong with the first that does not, if one does not.
pub(crate) async fn check_dead_letters(connection: &Connection, names: &Names) -> Option<String> {
    let channel = connection.create_channel().await.expect("channel");
    for _ in 0..20 {
        let Some(message) = channel
            .basic_get(names.dlq.as_str().into(), BasicGetOptions { no_ack: true })
            .await
            .expect("basic.get from the dead-letter queue")
        else {
            break;
        };
        let headers = message
            .delivery
            .properties
            .headers()
            .clone()
            .unwrap_or_default();
        let missing: Vec<&str> = ["x-retry-count", "x-error", "x-failed-at"]
            .into_iter()
            .filter(|header| !headers.inner().contains_key(*header))
            .collect();
        if !missing.is_empty() {
            closed(channel.close(200, "".into())).await;
            return Some(format!(
                "a dead letter without {}; its headers: {:?}",
                missing.join(", "),
                headers
                    .inner()
                    .keys()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
            ));
        }
    }
    closed(channel.close(200, "".into())).await;
    None
}

pub(crate) async fn run_once(
    target: &Target,
    side: Side,
    scenario: Scenario,
    n: usize,
    prefetch: u16,
) -> Sample {
    let admin = connect(target).await;
    let spec = spec_for(target, prefetch, side);
    let names = Names::of(side, &spec);
    declare(target, &spec, &names, side).await;
    let publish_channel = admin.create_channel().await.expect("channel");
    publish_channel
        .confirm_select(Default::default())
        .await
        .expect("confirms");
    prepublish(&publish_channel, &names, scenario, 0..n as u64).await;
    let expected_dead = scenario.permanent_among(n as u64);

    let broker = broker_pid(target);
    // What the set-up (and the run before) left the broker to do, such as
    // writing the messages just published or what deleting the last run's
    // queues left behind, would otherwise fall on this side's span.
    broker_process::quiet(broker).await;
    let broker_before = broker.and_then(broker_process::cpu_seconds_of);
    // A child that failed is reported once the run's topology is deleted.
    let run = if processes() {
        in_child(target, side, scenario, n, &spec).await
    } else {
        Ok(consume(target, side, scenario, n, &spec).await)
    };
    let broker_cpu = broker
        .and_then(broker_process::cpu_seconds_of)
        .zip(broker_before)
        .map(|(after, before)| after - before);
    let dead_letters = check_dead_letters(&admin, &names).await;
    // Deleted before any check fails: a failed run leaves nothing behind.
    delete(&admin, &names).await;
    closed(admin.close(200, "".into())).await;
    if side == Side::DedupePostgres {
        forget_keys(&spec.queue).await;
    }
    let run_of = format!("{} {} on {}", scenario.name, side.name(), target.name);
    let run = run.unwrap_or_else(|e| panic!("{run_of}: {e}"));
    assert_eq!(
        run.lost, 0,
        "{run_of}: every message handled or dead-lettered"
    );
    assert_eq!(
        run.dead, expected_dead,
        "{run_of}: every permanent failure is in the dead-letter queue"
    );
    if let Some(problem) = dead_letters {
        panic!("{run_of}: {problem}");
    }
    Sample {
        rate: n as f64 / run.elapsed,
        cpu_us: run.cpu * 1e6 / n as f64,
        broker_us: broker_cpu.map(|cpu| cpu * 1e6 / n as f64),
        duplicates: run.duplicates,
    }
}

pub(crate) async fn memory_check(target: &Target, prefetch: u16) {
    let admin = connect(target).await;
    let spec = spec_for(target, prefetch, Side::Framework);
    let names = Names::of(Side::Framework, &spec);
    declare(target, &spec, &names, Side::Framework).await;
    let channel = admin.create_channel().await.expect("channel");
    channel
        .confirm_select(Default::default())
        .await
        .expect("confirms");
    let s4 = SCENARIOS[3];
    let total = 200_000usize;
    let tally = Arc::new(Tally::new(total));
    let (stop, task) = start(target, Side::Framework, &spec, &names, &tally).await;
    let mut rss_at_20k = 0;
    let mut published = 0u64;
    for target in [20_000u64, 200_000] {
        while published < target {
            let next = (published + 10_000).min(target);
            prepublish(&channel, &names, s4, published..next).await;
            published = next;
            let ok_expected = published as usize - s4.permanent_among(published);
            while tally.ok.load(Ordering::Relaxed) < ok_expected {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        if target == 20_000 {
            rss_at_20k = rss_kib();
        }
    }
    let rss_at_200k = rss_kib();
    stop.shutdown();
    task.await.expect("runtime task");
    delete(&admin, &names).await;
    say!(
        "\nmemory (framework, S4): RSS {rss_at_20k} KiB after 20k messages, {rss_at_200k} KiB after 200k ({:+.1}%)",
        (rss_at_200k as f64 / rss_at_20k as f64 - 1.0) * 100.0
    );
}

/// Per side: rates, CPU µs per message and duplicates; and the broker's
/// CPU µs per message, where its process was found.
pub(crate) type Samples = (Vec<(Vec<f64>, Vec<f64>, usize)>, Vec<Vec<f64>>);

/// `reps` runs of each of `sides` over `scenario`'s `n` messages, the sides
/// alternating (`BENCH_EACH=1` prints each run as it ends).
pub(crate) async fn samples(
    target: &Target,
    sides: &[Side],
    scenario: Scenario,
    n: usize,
    reps: usize,
    prefetch: u16,
) -> Samples {
    // Per side: rates, CPU µs per message, duplicates, broker CPU µs
    // per message.
    let mut samples: Vec<(Vec<f64>, Vec<f64>, usize)> = vec![Default::default(); sides.len()];
    let mut brokers: Vec<Vec<f64>> = vec![Vec::new(); sides.len()];
    for rep in 0..reps {
        // A B C C B A …: no side always runs first or last.
        let mut order: Vec<usize> = (0..sides.len()).collect();
        if rep % 2 == 1 {
            order.reverse();
        }
        for i in order {
            if !sides[i].runs(scenario) {
                continue;
            }
            let s = run_once(target, sides[i], scenario, n, prefetch).await;
            if env_or("BENCH_EACH", 0) == 1 {
                eprintln!(
                    "{:<4} {:<29} {:>10.0} msg/s {:>7.1} µs {:>7} µs broker",
                    scenario.name,
                    sides[i].name(),
                    s.rate,
                    s.cpu_us,
                    s.broker_us.map_or("-".to_owned(), |b| format!("{b:.1}"))
                );
            }
            samples[i].0.push(s.rate);
            samples[i].1.push(s.cpu_us);
            samples[i].2 += s.duplicates;
            brokers[i].extend(s.broker_us);
        }
    }
    (samples, brokers)
}
