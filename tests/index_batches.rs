//! The dead-letter index written one way on every topology: summary entries
//! in batches, by the consumer and by the operator tools, and no stream
//! bound to a dead-letter exchange; an index of the previous format (a
//! whole copy of each dead letter, routed by the broker) is read as it is.

mod common;

use std::time::{Duration, Instant};

use common::*;
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel};
use rabbit_backoff::dead_letters::{
    DeadLetterFilter, DeadLetterRecord, Dlq, GroupSource, MessageEdit, ReplayOptions,
};
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::{Binding, Topology};
use rabbit_backoff_core::IndexBatch;

const WAIT: Duration = Duration::from_secs(15);

/// A `Dlq` of `spec` on the test broker, reading the index over its stream
/// port (`RABBITMQ_STREAM_PORT`, default 5552).
async fn connect_dlq(spec: &ConsumerSpec) -> Dlq {
    let port = std::env::var("RABBITMQ_STREAM_PORT")
        .ok()
        .and_then(|port| port.parse().ok())
        .unwrap_or(rabbit_backoff::dead_letters::DEFAULT_STREAM_PORT);
    Dlq::connect(&url(), spec).await.unwrap().stream_port(port)
}

/// Whether the broker binds `binding`'s queue to its exchange.
fn bound(binding: &Binding) -> bool {
    let listed = rabbitmqctl()
        .args(["-q", "list_bindings", "source_name", "destination_name"])
        .output()
        .expect("rabbitmqctl runs");
    String::from_utf8_lossy(&listed.stdout).lines().any(|line| {
        let mut fields = line.split('\t');
        fields.next() == Some(binding.exchange.as_str())
            && fields.next() == Some(binding.queue.as_str())
    })
}

/// The messages of the stream `stream`, read from its start up to its
/// `n`-th entry: each message's content type and how many entries it holds
/// (the end markers of reads left out).
async fn stream_messages(stream: &str, n: usize) -> Vec<(Option<String>, usize)> {
    use futures_util::StreamExt;
    let (connection, channel) = channel().await;
    channel.basic_qos(100, Default::default()).await.unwrap();
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-stream-offset".into(),
        AMQPValue::LongString("first".into()),
    );
    let mut consumer = channel
        .basic_consume(stream.into(), "".into(), Default::default(), arguments)
        .await
        .unwrap();
    let mut messages = Vec::new();
    let mut entries = 0;
    while entries < n {
        let next = tokio::time::timeout(WAIT, consumer.next())
            .await
            .unwrap_or_else(|_| panic!("{stream} held {entries} entries, not {n}"));
        let delivery = next.expect("the stream's consumer ends").unwrap();
        delivery.ack(Default::default()).await.unwrap();
        let marker = rabbit_backoff_core::headers::INDEX_MARKER;
        if header(&delivery.properties, marker).is_some() {
            continue;
        }
        let content_type = delivery
            .properties
            .content_type()
            .as_ref()
            .map(|t| t.to_string());
        let held = match content_type.as_deref() {
            Some(IndexBatch::CONTENT_TYPE) => {
                IndexBatch::decode(&delivery.data).unwrap().entries.len()
            }
            _ => 1,
        };
        entries += held;
        messages.push((content_type, held));
    }
    let _ = connection.close(200, "".into()).await;
    messages
}

/// A classic consumer binds no stream to its dead-letter exchange: it
/// removes the binding an earlier version left, writes the entries of its
/// dead letters itself, in batches, and `dlq groups` answers from them.
#[tokio::test]
async fn a_classic_consumer_binds_no_stream_and_writes_its_entries_in_batches() {
    let queue = unique("batches-classic");
    let mut spec = process_job.spec();
    spec.queue = queue.clone();
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    let topology = Topology::of(&spec);
    let index = &topology.dead_letter_index;
    // What an earlier version declared: the entries stream bound to the
    // dead-letter exchange beside the dead-letter queue.
    let framework = framework_connection().await;
    rabbit_backoff::topology::declare_topology(&*framework, &topology)
        .await
        .unwrap();
    let earlier = framework.open_channel().await.unwrap();
    for stream in index.queues() {
        earlier.declare_queue(stream).await.unwrap();
    }
    earlier.bind_queue(&index.binding).await.unwrap();
    earlier.close().await;
    assert!(bound(&index.binding));
    // Declaring the topology binds no stream any more.
    rabbit_backoff::topology::declare_topology(&*framework, &topology)
        .await
        .unwrap();

    let running = Running::start("batches-classic", |s| {
        s.queue = queue.clone();
        s.queue_type = Some(rabbit_backoff::QueueType::Classic);
    })
    .await;
    eventually("the old binding removed", WAIT, || !bound(&index.binding)).await;
    let publisher = publisher().await;
    for id in 0..20 {
        running
            .publish(&publisher, &Job::new(id, Fail::Permanent, None))
            .await;
    }
    let names = spec.names();
    let messages = stream_messages(&names.dead_letter_index(), 20).await;
    assert!(
        messages
            .iter()
            .all(|(t, _)| t.as_deref() == Some(IndexBatch::CONTENT_TYPE)),
        "{messages:?}"
    );
    assert!(
        messages.len() < 20,
        "batches of several entries: {messages:?}"
    );

    let dlq = connect_dlq(&spec).await;
    let report = dlq
        .group_report(&DeadLetterFilter::default())
        .await
        .unwrap();
    assert_eq!(report.source, GroupSource::Index, "{}", report.reason());
    assert_eq!(report.groups.iter().map(|g| g.count).sum::<usize>(), 20);
    let pass = dlq.use_index(false);
    assert_eq!(
        pass.groups(&DeadLetterFilter::default()).await.unwrap(),
        report.groups
    );
    // No stream is bound to the dead-letter exchange.
    assert!(!bound(&index.binding));
    pass.close().await;
    publisher.close().await;
    running.stop().await;
}

/// A declared classic topology with its index (as a consumer's index
/// writer declares it), no consumer, and dead letters `ids` to publish
/// (`m-<id>`, three kinds of error), not published yet.
async fn with_dead_letters(
    name: &str,
    ids: std::ops::Range<u64>,
) -> (ConsumerSpec, Cleanup, Vec<(BasicProperties, Vec<u8>)>) {
    let mut spec = process_job.spec();
    spec.queue = unique(name);
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    let cleanup = Cleanup::of(&spec);
    let framework = framework_connection().await;
    let topology = Topology::of(&spec);
    rabbit_backoff::topology::declare_topology(&*framework, &topology)
        .await
        .unwrap();
    rabbit_backoff_test_support::declare::index_streams(&*framework, &topology).await;
    let letters = ids
        .map(|id| {
            let text = |s: String| AMQPValue::LongString(s.into_bytes().into());
            let (error, reason) = match id % 3 {
                0 => (format!("order {id} not found"), "permanent"),
                1 => (
                    format!("payment gateway timeout after {id} ms"),
                    "exhausted",
                ),
                _ => (
                    format!("database unavailable: connection {id} refused"),
                    "exhausted",
                ),
            };
            let mut headers = FieldTable::default();
            headers.insert("x-error".into(), text(error));
            headers.insert("x-dead-letter-reason".into(), text(reason.into()));
            headers.insert(
                "x-failed-at".into(),
                text(format!("2026-12-04T00:00:{:02}.000Z", id % 60)),
            );
            headers.insert("x-original-queue".into(), text(spec.queue.clone()));
            headers.insert("tenant".into(), text("acme".into()));
            let properties = BasicProperties::default()
                .with_message_id(format!("m-{id}").into())
                .with_delivery_mode(2)
                .with_headers(headers);
            (properties, format!("{{\"id\":{id}}}").into_bytes())
        })
        .collect();
    (spec, cleanup, letters)
}

/// Publishes `letters` through the dead-letter exchange of `spec`,
/// confirmed.
async fn publish_dead_letters(
    channel: &Channel,
    spec: &ConsumerSpec,
    letters: &[(BasicProperties, Vec<u8>)],
) {
    let names = spec.names();
    for (properties, body) in letters {
        channel
            .basic_publish(
                names.dead_letter_exchange.as_str().into(),
                names.dead_letter_routing_key.as_str().into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                body,
                properties.clone(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }
}

async fn confirm_channel() -> (lapin::Connection, Channel) {
    let (connection, channel) = channel().await;
    channel.confirm_select(Default::default()).await.unwrap();
    (connection, channel)
}

/// The groups of the index, which must answer, equal to a pass's.
async fn index_equals_pass(dlq: Dlq) -> (Dlq, Vec<rabbit_backoff::dead_letters::DeadLetterGroup>) {
    let all = DeadLetterFilter::default();
    let report = dlq.group_report(&all).await.unwrap();
    assert_eq!(report.source, GroupSource::Index, "{}", report.reason());
    let pass = dlq.use_index(false);
    assert_eq!(pass.groups(&all).await.unwrap(), report.groups);
    (pass.use_index(true), report.groups)
}

/// `dlq import` writes the entries of what it imports, and a replay or an
/// edited replay whose copies go back to the dead-letter queue writes
/// theirs: the index answers `groups` after each, as a pass does.
#[tokio::test]
async fn import_replay_and_edit_write_their_entries() {
    let (spec, _cleanup, letters) = with_dead_letters("batches-tools", 0..9).await;
    let records: Vec<DeadLetterRecord> = {
        // Records as `dlq export` writes them, from a queue of their own.
        let (source, _source_cleanup, _) = with_dead_letters("batches-source", 0..0).await;
        let (connection, channel) = confirm_channel().await;
        publish_dead_letters(&channel, &source, &letters).await;
        let _ = connection.close(200, "".into()).await;
        let dlq = connect_dlq(&source).await;
        let mut exported = Vec::new();
        dlq.export(&DeadLetterFilter::default(), &mut exported)
            .await
            .unwrap();
        dlq.close().await;
        String::from_utf8(exported)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    };
    let dlq = connect_dlq(&spec).await;
    assert_eq!(dlq.import(records).await.unwrap(), 9);
    let (dlq, groups) = index_equals_pass(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 9);
    assert_eq!(groups.len(), 3);

    // A replay back into the dead-letter queue (through its exchange and
    // key): the originals' tombstones and the copies' entries.
    let names = spec.names();
    let back = ReplayOptions::default()
        .to_exchange(names.dead_letter_exchange.clone())
        .to_routing_key(names.dead_letter_routing_key.clone());
    let timeouts = DeadLetterFilter::default().error("timeout").unwrap();
    assert_eq!(dlq.replay(&timeouts, &back).await.unwrap().matched.len(), 3);
    let (dlq, groups) = index_equals_pass(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 9);
    // An edited one, straight to the queue through the default exchange.
    let edited = ReplayOptions::default()
        .to_exchange("")
        .to_routing_key(names.dead_letter_queue.clone())
        .edit(MessageEdit::default().body(b"{\"id\":4}".to_vec()));
    let one = DeadLetterFilter::default().message_id("m-0");
    assert_eq!(dlq.replay(&one, &edited).await.unwrap().matched.len(), 1);
    let (dlq, groups) = index_equals_pass(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 9);
    dlq.close().await;
}

/// An index of the previous format, whose stream the broker wrote a whole
/// copy of each dead letter to (bound to the dead-letter exchange), is
/// read as it is, before and beside the batches written after the
/// binding is gone; tombstones cancel entries of both.
#[tokio::test]
async fn an_index_of_the_previous_format_is_read_as_it_is() {
    let (spec, _cleanup, letters) = with_dead_letters("batches-previous", 0..12).await;
    let topology = Topology::of(&spec);
    let framework = framework_connection().await;
    let earlier = framework.open_channel().await.unwrap();
    earlier
        .bind_queue(&topology.dead_letter_index.binding)
        .await
        .unwrap();
    let (connection, channel) = confirm_channel().await;
    publish_dead_letters(&channel, &spec, &letters[..6]).await;
    let dlq = connect_dlq(&spec).await;
    let (dlq, groups) = index_equals_pass(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 6);

    // The binding removed, as a consumer does: the next dead letters come
    // with their entries in batches.
    earlier
        .unbind_queue(&topology.dead_letter_index.binding)
        .await
        .unwrap();
    earlier.close().await;
    publish_dead_letters(&channel, &spec, &letters[6..]).await;
    let written = dlq
        .write_index_entries(letters[6..].iter().map(|(p, body)| (p, body.len())))
        .await
        .unwrap();
    assert_eq!(written, 6);
    let messages = stream_messages(&spec.names().dead_letter_index(), 12).await;
    assert_eq!(messages.len(), 7, "6 copies, then one batch: {messages:?}");
    let (dlq, groups) = index_equals_pass(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 12);

    // A discard across both formats.
    let not_found = DeadLetterFilter::default().error("not found").unwrap();
    assert_eq!(dlq.discard(&not_found).await.unwrap().matched.len(), 4);
    let (dlq, groups) = index_equals_pass(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 8);
    // A text search needs the messages: a pass, saying why.
    let text = dlq
        .group_report(&DeadLetterFilter::default().text("acme"))
        .await
        .unwrap();
    assert_eq!(text.source, GroupSource::Pass);
    assert_eq!(
        text.fallback,
        Some(rabbit_backoff::dead_letters::IndexFallback::TextSearch)
    );
    assert_eq!(text.groups.iter().map(|g| g.count).sum::<usize>(), 8);
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

/// `dlq groups` over many dead letters (`BENCH_DEAD_LETTERS`, default
/// 1 000 000) from the index, written in batches (the default) or, with
/// `BENCH_INDEX_FORMAT=copies`, as the previous format wrote it (a copy of
/// each dead letter, routed beside the queue), read as it is: the fill's
/// and the read's times, and with `BENCH_STREAM_DIR` (the broker's stream
/// directory, e.g. `/var/lib/rabbitmq/mnesia/rabbit@localhost/stream`) the
/// entries stream's bytes on disk per dead letter. Not part of the suite:
/// `cargo test --release --test index_batches -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement: minutes over a million dead letters"]
async fn groups_over_many_dead_letters_from_the_index() {
    let n: u64 = std::env::var("BENCH_DEAD_LETTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let copies = std::env::var("BENCH_INDEX_FORMAT").is_ok_and(|f| f == "copies");
    let readers: usize = std::env::var("BENCH_INDEX_READERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(rabbit_backoff::dead_letters::DEFAULT_INDEX_READERS);
    let (spec, _cleanup, _) = with_dead_letters("batches-scale", 0..0).await;
    let names = spec.names();
    let topology = Topology::of(&spec);
    let framework = framework_connection().await;
    if copies {
        let earlier = framework.open_channel().await.unwrap();
        earlier
            .bind_queue(&topology.dead_letter_index.binding)
            .await
            .unwrap();
        earlier.close().await;
    }
    let (connection, channel) = confirm_channel().await;
    let dlq = connect_dlq(&spec).await.index_readers(readers);
    let body = vec![b'x'; 1024];
    let filled = Instant::now();
    let mut batch = Vec::with_capacity(1000);
    let mut pending = Vec::with_capacity(1000);
    for id in 0..n {
        let error = match id % 3 {
            0 => format!("order {id} not found"),
            1 => format!("payment gateway timeout after {id} ms"),
            _ => format!("invalid sku 'A{id}'"),
        };
        let text = |s: &str| AMQPValue::LongString(s.as_bytes().into());
        let mut headers = FieldTable::default();
        headers.insert("x-error".into(), text(&error));
        headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(3));
        headers.insert("x-failed-at".into(), text("2026-12-02T10:00:00.000Z"));
        headers.insert("x-dead-letter-reason".into(), text("exhausted"));
        let properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(format!("m-{id}").into())
            .with_headers(headers);
        pending.push(
            channel
                .basic_publish(
                    names.dead_letter_exchange.as_str().into(),
                    names.dead_letter_routing_key.as_str().into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    &body,
                    properties.clone(),
                )
                .await
                .unwrap(),
        );
        batch.push(properties);
        if pending.len() == 1000 || id + 1 == n {
            for confirm in pending.drain(..) {
                confirm.await.unwrap();
            }
            if !copies {
                dlq.write_index_entries(batch.iter().map(|p| (p, body.len())))
                    .await
                    .unwrap();
            }
            batch.clear();
        }
    }
    let fill = filled.elapsed();
    let format = if copies { "copies" } else { "batches" };
    println!(
        "{format}: filled {} and its index with {n} dead letters of 1 KiB in {:.1} s",
        names.dead_letter_queue,
        fill.as_secs_f64()
    );
    if let Ok(dir) = std::env::var("BENCH_STREAM_DIR") {
        let bytes = stream_bytes(&dir, &names.dead_letter_index());
        println!(
            "{format}: the entries stream holds {bytes} bytes on disk, {:.1} bytes a dead letter",
            bytes as f64 / n as f64
        );
    }
    for round in 0..2 {
        let cpu = process_cpu();
        let timed = Instant::now();
        let report = dlq
            .group_report(&DeadLetterFilter::default())
            .await
            .unwrap();
        let took = timed.elapsed();
        assert_eq!(report.source, GroupSource::Index, "{}", report.reason());
        assert_eq!(
            report.groups.iter().map(|g| g.count).sum::<usize>() as u64,
            n
        );
        println!(
            "{format}: dlq groups from the index over {n} dead letters, {readers} readers, \
             read {round}: {:.2} s ({:?}), client CPU {:.2} s",
            took.as_secs_f64(),
            report.index_protocol(),
            process_cpu() - cpu
        );
    }
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

/// The bytes of the segment files of `stream` under the broker's stream
/// directory `dir` (a directory per stream, named `__<stream>_<timestamp>`
/// on the virtual host `/`, the stream's dots written as underscores).
fn stream_bytes(dir: &str, stream: &str) -> u64 {
    let name = format!("__{}", stream.replace('.', "_"));
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir).expect("the stream directory") {
        let entry = entry.unwrap();
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let ours = file_name.rsplit_once('_').is_some_and(|(named, stamp)| {
            named == name && stamp.bytes().all(|b| b.is_ascii_digit())
        });
        if !ours {
            continue;
        }
        for file in std::fs::read_dir(entry.path()).unwrap() {
            let file = file.unwrap();
            if file.file_name().to_string_lossy().ends_with(".segment") {
                bytes += file.metadata().unwrap().len();
            }
        }
    }
    bytes
}

/// This process's CPU time so far (user and system), in seconds.
fn process_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}
