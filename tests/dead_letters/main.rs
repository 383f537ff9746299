//! Operating dead letters through the library: peek, replay, discard,
//! status, the order of a pass, groups read from the dead-letter index, and
//! the index healing after the queue changed behind its back. One test
//! binary; a file per behaviour, what several share here.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/counters.rs"]
mod counters;
mod groups;
mod healing;
mod index_read;
mod order;
mod replay;
mod replay_jobs;

use std::time::{Duration, Instant};

use common::*;
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel};
use rabbit_backoff::dead_letters::{
    DeadLetterFilter, Dlq, GroupReport, GroupSource, IndexFallback, ReplayOptions,
};
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::Topology;
use rabbit_backoff_test_support::publish::publish_with;

const WAIT: Duration = Duration::from_secs(15);

/// The test broker's stream port (`RABBITMQ_STREAM_PORT`, default 5552),
/// where the dead-letter index is read over the stream protocol.
fn stream_port() -> u16 {
    std::env::var("RABBITMQ_STREAM_PORT")
        .ok()
        .and_then(|port| port.parse().ok())
        .unwrap_or(rabbit_backoff::dead_letters::DEFAULT_STREAM_PORT)
}

/// A `Dlq` of `spec` on the test broker, reading the index over its stream
/// port.
async fn connect_dlq(spec: &ConsumerSpec) -> Dlq {
    Dlq::connect(&url(), spec)
        .await
        .unwrap()
        .stream_port(stream_port())
}

/// A [`declared`] topology holding the dead letters of jobs `0..n`, job
/// `id` failing with `error(id)` after `count(id)` retries; with the
/// channel that put them there (in confirm mode) and the operator's
/// connection to the dead-letter queue.
async fn seeded(
    name: &str,
    n: u64,
    error: impl Fn(u64) -> &'static str,
    count: impl Fn(u64) -> i64,
) -> (ConsumerSpec, Cleanup, (lapin::Connection, Channel), Dlq) {
    seeded_with(name, |_| {}, n, error, count).await
}

/// [`seeded`] on a topology that `configure` changes.
async fn seeded_with(
    name: &str,
    configure: impl FnOnce(&mut ConsumerSpec),
    n: u64,
    error: impl Fn(u64) -> &'static str,
    count: impl Fn(u64) -> i64,
) -> (ConsumerSpec, Cleanup, (lapin::Connection, Channel), Dlq) {
    let (spec, cleanup) = declared_with(name, configure).await;
    let (connection, channel) = confirm_channel().await;
    for id in 0..n {
        dead_letter(&channel, &spec, id, error(id), count(id)).await;
    }
    let dlq = connect_dlq(&spec).await;
    (spec, cleanup, (connection, channel), dlq)
}

/// A declared consumer topology with no consumer, for synthetic dead letters.
async fn declared(name: &str) -> (ConsumerSpec, Cleanup) {
    declared_with(name, |_| {}).await
}

async fn declared_with(
    name: &str,
    configure: impl FnOnce(&mut ConsumerSpec),
) -> (ConsumerSpec, Cleanup) {
    let mut spec = process_job.spec();
    spec.queue = unique(name);
    // Synthetic dead letters, published through the dead-letter exchange,
    // each with its entry in the index as a consumer writes it
    // ([`dead_letter`]); classic queues unless a test says otherwise.
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    configure(&mut spec);
    let cleanup = Cleanup::of(&spec);
    let connection = connect().await;
    let framework = framework_connection().await;
    let topology = Topology::of(&spec);
    rabbit_backoff::topology::declare_topology(&*framework, &topology)
        .await
        .unwrap();
    rabbit_backoff_test_support::declare::index_streams(&*framework, &topology).await;
    let _ = connection.close(200, "".into()).await;
    (spec, cleanup)
}

/// Writes the index entries of dead letters published to the queue of
/// `spec` (their properties and body sizes), as the consumer writes those
/// of the dead letters it makes once the broker confirmed them.
async fn index_entries(spec: &ConsumerSpec, dead_letters: &[(BasicProperties, usize)]) {
    let dlq = Dlq::connect(&url(), spec).await.unwrap();
    let written = dlq
        .write_index_entries(dead_letters.iter().map(|(p, len)| (p, *len)))
        .await
        .unwrap();
    assert_eq!(written, dead_letters.len(), "the index is there");
    dlq.close().await;
}

/// Puts a dead letter for job `id` in the DLQ, as the runtime would.
async fn dead_letter(channel: &Channel, spec: &ConsumerSpec, id: u64, error: &str, count: i64) {
    let names = spec.names();
    let mut headers = FieldTable::default();
    let text = |s: &str| AMQPValue::LongString(s.as_bytes().into());
    headers.insert("x-error".into(), text(error));
    headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(count));
    headers.insert(
        "x-failed-at".into(),
        text(&humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()),
    );
    headers.insert(
        "x-dead-letter-reason".into(),
        text(if count > 0 { "exhausted" } else { "permanent" }),
    );
    headers.insert("x-original-queue".into(), text(&spec.queue));
    headers.insert("x-original-exchange".into(), text(&names.exchange));
    headers.insert("x-original-routing-key".into(), text(&names.routing_key));
    headers.insert("tenant".into(), text("acme"));
    let body = serde_json::to_vec(&Job {
        id,
        fail: Fail::None,
        attempts: None,
    })
    .unwrap();
    let properties = BasicProperties::default()
        .with_message_id(format!("m-{id}").into())
        .with_delivery_mode(2)
        .with_headers(headers);
    publish_with(
        channel,
        &names.dead_letter_exchange,
        &names.dead_letter_routing_key,
        BasicPublishOptions {
            mandatory: true,
            ..Default::default()
        },
        &body,
        properties.clone(),
    )
    .await;
    index_entries(spec, &[(properties, body.len())]).await;
}

async fn confirm_channel() -> (lapin::Connection, Channel) {
    let (connection, channel) = channel().await;
    channel.confirm_select(Default::default()).await.unwrap();
    (connection, channel)
}

/// Every group of `dlq`'s dead letters, as `dlq groups` reports them.
async fn all_groups(dlq: &Dlq) -> GroupReport {
    dlq.group_report(&DeadLetterFilter::default())
        .await
        .unwrap()
}

/// Asserts that `report` was made by a pass over the queue, the index
/// having answered with `fallback`.
fn assert_from_a_pass(report: &GroupReport, fallback: IndexFallback) {
    assert_eq!(report.source, GroupSource::Pass);
    assert_eq!(report.fallback, Some(fallback));
}

fn ids(report: &rabbit_backoff::dead_letters::DeadLetterReport) -> Vec<String> {
    report
        .matched
        .iter()
        .map(|m| m.message_id.clone().unwrap())
        .collect()
}

async fn eventually_depth(channel: &Channel, queue: &str, n: u32) {
    depth_within(channel, queue, n, WAIT).await;
}

/// Waits until `queue` holds `n` messages, for at most `within`.
async fn depth_within(channel: &Channel, queue: &str, n: u32, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let held = depth(channel, queue).await;
        if held == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{queue} never held {n} messages (it holds {held})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Awaits the confirms `pending` once it holds more than `most`.
async fn confirmed(pending: &mut Vec<lapin::PublisherConfirm>, most: usize) {
    if pending.len() > most {
        for confirm in pending.drain(..) {
            confirm.await.unwrap();
        }
    }
}

/// Dead letters of three groups through the dead-letter exchange, as the
/// consumer sends them: errors that differ only in their numbers, and two
/// reasons.
async fn mixed_dead_letters(channel: &Channel, spec: &ConsumerSpec, ids: std::ops::Range<u64>) {
    for id in ids {
        let (error, count) = match id % 3 {
            0 => (format!("order {id} not found"), 0),
            1 => (format!("payment gateway timeout after {id} ms"), 3),
            _ => (format!("database unavailable: connection {id} refused"), 3),
        };
        dead_letter(channel, spec, id, &error, count).await;
    }
}

/// The groups from the index and from a pass over the same queue, which
/// must be equal; returns them.
async fn index_equals_pass(
    dlq: Dlq,
    spec: &ConsumerSpec,
) -> (Dlq, Vec<rabbit_backoff::dead_letters::DeadLetterGroup>) {
    let from_index = all_groups(&dlq).await;
    assert_eq!(
        from_index.source,
        rabbit_backoff::dead_letters::GroupSource::Index,
        "{:?}",
        from_index.fallback
    );
    assert_eq!(from_index.fallback, None);
    let dlq = dlq.use_index(false);
    let from_pass = all_groups(&dlq).await;
    assert_eq!(
        from_pass.source,
        rabbit_backoff::dead_letters::GroupSource::Pass
    );
    assert_eq!(from_index.groups, from_pass.groups);
    // A filter is applied to the index's entries as to the queue's messages.
    let filter = DeadLetterFilter::default().error("timeout").unwrap();
    let pass_filtered = dlq.groups(&filter).await.unwrap();
    let dlq = dlq.use_index(true);
    let filtered = dlq.group_report(&filter).await.unwrap();
    assert_eq!(
        filtered.source,
        rabbit_backoff::dead_letters::GroupSource::Index
    );
    assert_eq!(filtered.groups, pass_filtered);
    let _ = spec;
    (dlq, from_index.groups)
}

/// Dead letters the broker makes itself from `queue`: `expiring` messages
/// that expire there at once, then `rejected` ones taken and rejected
/// without requeue, so that its dead-letter exchange routes them.
async fn broker_dead_letters(channel: &Channel, queue: &str, expiring: u64, rejected: u64) {
    for id in 0..expiring + rejected {
        let properties = BasicProperties::default()
            .with_message_id(format!("r-{id}").into())
            .with_delivery_mode(2);
        let properties = if id < expiring {
            properties.with_expiration("1".into())
        } else {
            properties
        };
        publish(
            channel,
            "",
            queue,
            format!("{{\"id\":{id}}}").as_bytes(),
            properties,
        )
        .await;
    }
    // The expiring ones leave the queue before any is fetched: a fetch
    // within their millisecond would get one, reject it and leave a
    // message that never expires.
    eventually_depth(channel, queue, rejected as u32).await;
    for _ in 0..rejected {
        let got = next_message_acked(channel, queue).await;
        got.acker
            .reject(lapin::options::BasicRejectOptions { requeue: false })
            .await
            .unwrap();
    }
}

/// Takes one message from `queue` for manual acknowledgement.
async fn next_message_acked(channel: &Channel, queue: &str) -> lapin::message::BasicGetMessage {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(got) = channel
            .basic_get(
                queue.into(),
                lapin::options::BasicGetOptions { no_ack: false },
            )
            .await
            .unwrap()
        {
            return got;
        }
        assert!(Instant::now() < deadline, "nothing came to {queue}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An in-memory broker with the topology of a consumer of `queue`, and
/// dead letters `m-<id>` (`order <id> not found`) sent through its
/// dead-letter exchange.
async fn in_memory_dead_letters(
    queue: &str,
    ids: std::ops::Range<u64>,
) -> (rabbit_backoff::testing::TestBroker, ConsumerSpec) {
    use rabbit_backoff::transport::{Publication, Transport};
    let broker = rabbit_backoff::testing::TestBroker::new();
    let mut spec = process_job.spec();
    spec.queue = queue.into();
    // As above: the broker writes the index of a classic topology.
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    let connection = broker.connect().await.unwrap();
    rabbit_backoff::topology::declare_topology(&*connection, &Topology::of(&spec))
        .await
        .unwrap();
    let names = spec.names();
    let channel = connection.open_channel().await.unwrap();
    for id in ids {
        let mut headers = FieldTable::default();
        headers.insert(
            "x-error".into(),
            AMQPValue::LongString(format!("order {id} not found").into_bytes().into()),
        );
        let confirm = channel
            .publish(Publication::new(
                &names.dead_letter_exchange,
                &names.dead_letter_routing_key,
                b"{}",
                BasicProperties::default()
                    .with_message_id(format!("m-{id}").into())
                    .with_headers(headers),
            ))
            .await
            .unwrap();
        assert_eq!(confirm, rabbit_backoff::transport::Confirm::Ack);
    }
    (broker, spec)
}
