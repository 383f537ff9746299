//! Operating a large dead-letter queue against the real broker: a limited
//! peek, groups and an export over `BENCH_DEAD_LETTERS` dead letters of 1 KiB
//! (default 1 000 000), with the time of each, this process's peak resident
//! memory during the operations and the broker's memory before and during
//! them. Every run checks that the queue holds the same messages in the same
//! order after the operations (a quorum queue of which only the index was
//! read: that it holds as many, see below).
//!
//! `cargo bench --bench dead_letters`; `BENCH_DEAD_LETTERS=100000` for a
//! shorter run. Under `cargo test` it runs once with 3000 messages (past the
//! window a pass holds), as a test.
//!
//! The dead letters go through the dead-letter exchange, as a consumer sends
//! them, and their summaries into the dead-letter index beside the queue
//! (two streams, declared here as the framework declares them). `groups` is the
//! library's `Dlq::group_report`, which reads the index (the run checks that
//! it did); `pass` is the same call with `Dlq::use_index(false)`, a pass over
//! the queue, and the run checks that both give the same groups.
//!
//! Side by side: `BENCH_QUEUE_VERSIONS=1,2` fills one dead-letter queue per
//! classic queue version (`x-queue-version`, RabbitMQ 3.10 to 4.2; 4.3 has
//! only version 2) and runs the
//! operations over each in turn, so that their ratio is measured under the
//! same load; `BENCH_OPS=groups` (any of `peek`, `groups`, `pass`,
//! `export`, `heal`) runs only some operations. `heal` puts one message
//! straight into the queue (no index entry: the index is out of step), then
//! times `Dlq::group_report` twice: the pass that leaves a checkpoint, and
//! the read from the index that starts from it. `BENCH_INDEX_READERS=1,2,1`
//! times the index read on one channel, then two, then one again, over the
//! same fill (`Dlq::index_readers`). The index is read over the stream
//! protocol at `RABBITMQ_STREAM_PORT` (default 5552) when the broker serves
//! it, over AMQP with `BENCH_STREAM_PROTOCOL=0`.
//!
//! `BENCH_QUEUE_TYPE=quorum` declares the topology of a quorum consumer
//! (`Topology::of` with `QueueType::Quorum`): a quorum dead-letter queue,
//! and the index's streams declared with the same arguments and bound to
//! nothing (`IndexFeed::Written`). On every topology, each batch of dead
//! letters is published to the dead-letter exchange, confirmed, and then
//! its summary entries are written to the index as the consumer's index
//! writer writes them (`Dlq::write_index_entries`, many to a stream
//! message). `AMQP_URL` may list a cluster's nodes
//! (`amqp://guest:guest@127.0.0.1:5673/%2f,...`: the bench declares and
//! fills through the first, `Dlq` connects along the list);
//! `BENCH_QUEUE_VERSIONS` does not apply. When only `groups` ran on a
//! quorum queue, the run checks the queue's message count instead of its
//! order (which would take one more pass).
//! `BENCH_BROKER_MEMORY=0` leaves out the broker's memory, which
//! `rabbitmq-diagnostics` reads from the local default node only.

use std::io::Write;
use std::time::{Duration, Instant};

use lapin::options::{
    BasicPublishOptions, ExchangeDeclareOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use lapin::{Confirmation, PublisherConfirm};
use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, GroupSource};
use rabbit_backoff::topology::{Argument, IndexFeed, Topology};
use rabbit_backoff::{ConsumerSpec, QueueType};

/// The type of the dead-letter queue (`BENCH_QUEUE_TYPE`, `classic` or
/// `quorum`; default classic).
fn queue_type() -> QueueType {
    match std::env::var("BENCH_QUEUE_TYPE").as_deref() {
        Err(_) | Ok("classic") => QueueType::Classic,
        Ok("quorum") => QueueType::Quorum,
        Ok(other) => panic!("BENCH_QUEUE_TYPE: {other:?} is not classic or quorum"),
    }
}

/// The channels of each index read, in turn (`BENCH_INDEX_READERS`, a
/// comma-separated list, default the library's default): `1,2,1` times the
/// same read on one channel, two, and one again, over one fill.
fn index_readers() -> Vec<usize> {
    std::env::var("BENCH_INDEX_READERS")
        .map(|list| {
            list.split(',')
                .map(|v| {
                    v.trim()
                        .parse()
                        .unwrap_or_else(|_| panic!("BENCH_INDEX_READERS: {v:?} is not a number"))
                })
                .collect()
        })
        .unwrap_or_else(|_| vec![rabbit_backoff::dead_letters::DEFAULT_INDEX_READERS])
}

/// The broker's stream port (`RABBITMQ_STREAM_PORT`, default 5552), where
/// the index is read unless `BENCH_STREAM_PROTOCOL=0`.
fn stream_port() -> u16 {
    std::env::var("RABBITMQ_STREAM_PORT")
        .ok()
        .and_then(|port| port.parse().ok())
        .unwrap_or(rabbit_backoff::dead_letters::DEFAULT_STREAM_PORT)
}

fn url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// The first node of `AMQP_URL` (a comma-separated list on a cluster), to
/// which this bench's own connection declares and fills.
fn first_url() -> String {
    url()
        .split(',')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn main() {
    let under_test = !std::env::args().any(|a| a == "--bench");
    let n: usize = std::env::var("BENCH_DEAD_LETTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if under_test { 3000 } else { 1_000_000 });
    let queue_type = queue_type();
    let versions: Vec<u8> = std::env::var("BENCH_QUEUE_VERSIONS")
        // 0: the broker's own default (1 on 3.10, 2 on 4.x), no argument.
        .unwrap_or_else(|_| "0".to_owned())
        .split(',')
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("BENCH_QUEUE_VERSIONS: {v:?} is not 0, 1 or 2"))
        })
        .collect();
    if queue_type == QueueType::Quorum {
        assert_eq!(
            versions,
            [0],
            "BENCH_QUEUE_VERSIONS is for classic queues, not with BENCH_QUEUE_TYPE=quorum"
        );
    }
    let ops = std::env::var("BENCH_OPS").unwrap_or_else(|_| "peek,groups,pass,export".to_owned());
    let ops = Ops {
        heal: ops.contains("heal"),
        pass: ops.contains("pass"),
        peek: ops.contains("peek"),
        groups: ops.contains("groups"),
        export: ops.contains("export"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "load average at the start: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let mut rows = Vec::new();
    for version in versions {
        rows.push(runtime.block_on(run(n, version, queue_type, ops)));
    }
    println!();
    println!(
        "| {n} dead letters of 1 KiB | queue | peek --limit 5 | groups (index) | groups (pass) | export | client peak RSS: index / pass / all | broker before → peak |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let rate = |d: Option<Duration>| match d {
        Some(d) => format!(
            "{:.1} s ({:.0} msg/s)",
            d.as_secs_f64(),
            n as f64 / d.as_secs_f64()
        ),
        None => "-".to_owned(),
    };
    for row in &rows {
        println!(
            "| | {} | {} | {} | {} | {} | {:.0} / {:.0} / {:.0} MiB | {} → {:.0} MiB |",
            row.label,
            row.peek
                .map_or("-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64())),
            rate(row.groups),
            rate(row.pass),
            rate(row.export),
            row.index_rss_mib,
            row.pass_rss_mib,
            row.client_rss_mib,
            row.broker_before
                .map_or("unknown".to_owned(), |m| format!("{m:.0}")),
            row.broker_peak,
        );
    }
    for row in &rows {
        println!(
            "{}: CPU seconds, client / broker: index read {:.1} / {:.1}, pass {:.1} / {:.1}",
            row.label, row.index_cpu.0, row.index_cpu.1, row.pass_cpu.0, row.pass_cpu.1
        );
        println!(
            "{}: declaring the dead-letter exchange, queue and binding took {:.0} ms, the index's two streams {:.0} ms; broker memory during the index read peaked at {:.0} MiB",
            row.label,
            row.declare.0.as_secs_f64() * 1000.0,
            row.declare.1.as_secs_f64() * 1000.0,
            row.index_broker_peak,
        );
    }
    println!(
        "load average at the end: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}

#[derive(Clone, Copy)]
struct Ops {
    peek: bool,
    /// `Dlq::group_report`: the index.
    groups: bool,
    /// `Dlq::group_report` with `use_index(false)`: a pass.
    pass: bool,
    export: bool,
    /// An arrival without an entry, then the pass that checkpoints and the
    /// read from the checkpoint.
    heal: bool,
}

/// The figures of one queue version (or the quorum queue).
struct Row {
    /// `v1`, `v2` (`v0`: the broker's default version) or `quorum`.
    label: String,
    /// Declaring the dead-letter queue's objects, and the index's.
    declare: (Duration, Duration),
    peek: Option<Duration>,
    groups: Option<Duration>,
    pass: Option<Duration>,
    export: Option<Duration>,
    /// This process's peak during the index read, the pass, and all.
    index_rss_mib: f64,
    pass_rss_mib: f64,
    client_rss_mib: f64,
    broker_before: Option<f64>,
    /// The broker's memory at the end of the index read.
    index_broker_peak: f64,
    /// CPU seconds of this process and of the broker during the index
    /// read, and during the pass.
    index_cpu: (f64, f64),
    pass_cpu: (f64, f64),
    broker_peak: f64,
}

async fn run(n: usize, version: u8, queue_type: QueueType, ops: Ops) -> Row {
    let queue = format!(
        "rbt.bench.dlq.{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let mut spec = ConsumerSpec::new(queue.clone(), "1s".parse().expect("delays"));
    if queue_type == QueueType::Quorum {
        spec.queue_type = Some(QueueType::Quorum);
    }
    let names = spec.names();
    let topology = Topology::of(&spec);
    let feed = topology.index_feed().expect("the index is on by default");
    let label = match queue_type {
        QueueType::Quorum => "quorum".to_owned(),
        _ => format!("v{version}"),
    };
    let dead_letter_queue = names.dead_letter_queue.clone();
    let connection = Connection::connect(&first_url(), ConnectionProperties::default())
        .await
        .expect("a broker at AMQP_URL (scripts/ensure-broker.sh starts one)");
    let channel = connection.create_channel().await.expect("a channel");
    channel
        .confirm_select(Default::default())
        .await
        .expect("confirms");
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    // The dead-letter exchange and queue (of the queue version asked for),
    // then the index beside it, as the framework declares it.
    let declared = Instant::now();
    channel
        .exchange_declare(
            names.dead_letter_exchange.as_str().into(),
            lapin::ExchangeKind::Direct,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("the dead-letter exchange");
    let arguments = if queue_type == QueueType::Quorum {
        // As the framework declares a quorum consumer's.
        field_table(&topology.dead_letter_queue.arguments)
    } else {
        let mut arguments = FieldTable::default();
        if version > 0 {
            arguments.insert(
                "x-queue-version".into(),
                AMQPValue::ShortInt(version.into()),
            );
        }
        arguments
    };
    channel
        .queue_declare(dead_letter_queue.as_str().into(), durable, arguments)
        .await
        .expect("the dead-letter queue");
    channel
        .queue_bind(
            dead_letter_queue.as_str().into(),
            names.dead_letter_exchange.as_str().into(),
            names.dead_letter_routing_key.as_str().into(),
            Default::default(),
            FieldTable::default(),
        )
        .await
        .expect("the dead-letter queue's binding");
    let declare_queue = declared.elapsed();
    let declared = Instant::now();
    let index = &topology.dead_letter_index;
    for stream in index.queues() {
        channel
            .queue_declare(
                stream.name.as_str().into(),
                durable,
                field_table(&stream.arguments),
            )
            .await
            .expect("an index stream");
    }
    let declare_index = declared.elapsed();

    // The entries, written as the consumer's index writer writes them:
    // summaries, many to a stream message, on a connection of their own.
    let writer = Dlq::connect(&url(), &spec).await.expect("connects");
    let started = Instant::now();
    fill(
        &channel,
        &writer,
        &names.dead_letter_exchange,
        &names.dead_letter_routing_key,
        n,
    )
    .await;
    writer.close().await;
    println!(
        "{label}: filled {dead_letter_queue} and its index with {n} dead letters of 1 KiB in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let broker_before = broker_memory_mib();
    reset_peak_rss();

    let dlq = Dlq::connect(&url(), &spec)
        .await
        .expect("connects")
        .stream_port(stream_port())
        .stream_protocol(std::env::var("BENCH_STREAM_PROTOCOL").map_or(true, |v| v != "0"));
    let mut row = Row {
        label: label.clone(),
        declare: (declare_queue, declare_index),
        peek: None,
        groups: None,
        pass: None,
        export: None,
        index_rss_mib: 0.0,
        pass_rss_mib: 0.0,
        client_rss_mib: 0.0,
        broker_before,
        index_broker_peak: 0.0,
        index_cpu: (0.0, 0.0),
        pass_cpu: (0.0, 0.0),
        broker_peak: 0.0,
    };
    if ops.peek {
        let timed = Instant::now();
        let peek = dlq
            .peek(&DeadLetterFilter::default().limit(5))
            .await
            .expect("peek");
        row.peek = Some(timed.elapsed());
        assert_eq!(peek.matched.len(), 5.min(n));
        assert_eq!(peek.kept, n);
    }

    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = tokio::spawn({
        let done = std::sync::Arc::clone(&done);
        async move {
            let mut peak = 0.0f64;
            let mut sampled = Instant::now();
            loop {
                // Each sample starts an Erlang VM (about a second of CPU):
                // one every 10 s, and one at the end.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let finished = done.load(std::sync::atomic::Ordering::Relaxed);
                if finished || sampled.elapsed() >= Duration::from_secs(10) {
                    sampled = Instant::now();
                    let now = tokio::task::spawn_blocking(broker_memory_mib)
                        .await
                        .unwrap_or(None)
                        .unwrap_or(0.0);
                    peak = peak.max(now);
                }
                if finished {
                    return peak;
                }
            }
        }
    });
    let mut from_index = None;
    let mut dlq = dlq;
    if ops.groups {
        for readers in index_readers() {
            dlq = dlq.index_readers(readers);
            reset_peak_rss();
            let cpu = cpu_seconds();
            let timed = Instant::now();
            let report = dlq
                .group_report(&DeadLetterFilter::default())
                .await
                .expect("groups");
            let took = timed.elapsed();
            row.index_cpu = since(cpu);
            row.groups = Some(took);
            row.index_rss_mib = peak_rss_mib();
            row.index_broker_peak = broker_memory_mib().unwrap_or(0.0);
            println!(
                "{label}: groups from the index on {readers} reader(s) over {} {:.1} s, CPU client {:.1} s / broker {:.1} s, client peak RSS {:.0} MiB",
                report.index_protocol().map_or("-", |p| p.as_str()),
                took.as_secs_f64(),
                row.index_cpu.0,
                row.index_cpu.1,
                row.index_rss_mib,
            );
            assert_eq!(
                report.source,
                GroupSource::Index,
                "read the index: {:?}",
                report.fallback
            );
            assert_eq!(report.groups.iter().map(|g| g.count).sum::<usize>(), n);
            assert_eq!(report.groups.len(), 3.min(n));
            if let Some(earlier) = &from_index {
                assert_eq!(
                    &report.groups, earlier,
                    "the same groups on any number of channels"
                );
            }
            from_index = Some(report.groups);
        }
    }
    let dlq = dlq.use_index(false);
    if ops.pass {
        reset_peak_rss();
        let cpu = cpu_seconds();
        let timed = Instant::now();
        let report = dlq
            .group_report(&DeadLetterFilter::default())
            .await
            .expect("groups");
        row.pass = Some(timed.elapsed());
        row.pass_cpu = since(cpu);
        row.pass_rss_mib = peak_rss_mib();
        println!(
            "{label}: groups with a pass {:.1} s",
            timed.elapsed().as_secs_f64()
        );
        assert_eq!(report.source, GroupSource::Pass);
        assert_eq!(report.groups.iter().map(|g| g.count).sum::<usize>(), n);
        if let Some(from_index) = &from_index {
            assert_eq!(&report.groups, from_index, "the index groups as a pass");
        }
    }
    if ops.export {
        let timed = Instant::now();
        let mut sink = Counting::default();
        let export = dlq
            .export(&DeadLetterFilter::default(), &mut sink)
            .await
            .expect("export");
        row.export = Some(timed.elapsed());
        println!(
            "{label}: export {:.1} s ({} MiB of JSONL)",
            timed.elapsed().as_secs_f64(),
            sink.bytes >> 20
        );
        assert_eq!(export.exported, n);
        assert_eq!(sink.lines, n);
    }
    let mut expected = n;
    let dlq = dlq.use_index(true);
    if ops.heal {
        channel
            .basic_publish(
                "".into(),
                dead_letter_queue.as_str().into(),
                BasicPublishOptions::default(),
                b"{}",
                BasicProperties::default()
                    .with_delivery_mode(2)
                    .with_message_id("unindexed".into()),
            )
            .await
            .expect("publish")
            .await
            .expect("confirmed");
        expected += 1;
        reset_peak_rss();
        let timed = Instant::now();
        let first = dlq
            .group_report(&DeadLetterFilter::default())
            .await
            .expect("groups");
        let pass = timed.elapsed();
        let pass_rss = peak_rss_mib();
        assert_eq!(first.source, GroupSource::Pass);
        reset_peak_rss();
        let timed = Instant::now();
        let second = dlq
            .group_report(&DeadLetterFilter::default())
            .await
            .expect("groups");
        let index = timed.elapsed();
        println!(
            "{label}: out of step by one: the pass that writes a checkpoint {:.1} s ({pass_rss:.0} MiB; {}), the next read {:.2} s ({:.0} MiB; {})",
            pass.as_secs_f64(),
            first.reason(),
            index.as_secs_f64(),
            peak_rss_mib(),
            second.reason(),
        );
        assert_eq!(second.source, GroupSource::Index, "{}", second.reason());
        assert_eq!(second.groups, first.groups);
        assert_eq!(
            second.groups.iter().map(|g| g.count).sum::<usize>(),
            expected
        );
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    row.broker_peak = sampler.await.unwrap_or(0.0);
    row.client_rss_mib = peak_rss_mib().max(row.index_rss_mib).max(row.pass_rss_mib);

    if feed == IndexFeed::Written && !(ops.peek || ops.pass || ops.export || ops.heal) {
        // Only the index was read: the queue is as the fill left it, so
        // the count is checked instead of the order (one more pass).
        let queue = channel
            .queue_declare(
                dead_letter_queue.as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("the dead-letter queue");
        assert_eq!(queue.message_count() as usize, expected, "nothing lost");
    } else {
        let after = dlq
            .peek(&DeadLetterFilter::default().limit(3))
            .await
            .expect("peek");
        let first: Vec<String> = after
            .matched
            .iter()
            .map(|m| m.message_id.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            first,
            ["m-0", "m-1", "m-2"][..3.min(n)],
            "the order is kept"
        );
        assert_eq!(after.kept, expected, "nothing lost");
    }
    dlq.close().await;

    for queue in topology
        .dead_letter_index
        .queues()
        .into_iter()
        .map(|q| q.name.clone())
        .chain([
            dead_letter_queue.clone(),
            format!("{dead_letter_queue}.pass"),
        ])
    {
        let _ = channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    let _ = channel
        .exchange_delete(
            names.dead_letter_exchange.as_str().into(),
            Default::default(),
        )
        .await;
    let _ = connection.close(200, "".into()).await;
    row
}

/// The arguments of a declaration, as the runtime's transport writes them.
fn field_table(arguments: &[(String, Argument)]) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in arguments {
        let value = match value {
            Argument::Int(n) => AMQPValue::LongLongInt(*n),
            Argument::Str(s) => AMQPValue::LongString(s.as_bytes().into()),
            other => panic!("an argument this bench cannot write: {other:?}"),
        };
        table.insert(key.as_str().into(), value);
    }
    table
}

/// Awaits a publisher confirm: an ack, the message not returned.
async fn confirmed(confirm: PublisherConfirm, what: &str) {
    match confirm.await.expect("confirmed") {
        Confirmation::Ack(None) => {}
        other => panic!("{what} was not taken: {other:?}"),
    }
}

/// Publishes `n` dead letters of 1 KiB, three kinds of error, confirmed in
/// batches of 1000, through the dead-letter exchange as a consumer does.
/// Each batch, once confirmed, has its summary entries written to the
/// index through `index` ([`Dlq::write_index_entries`], the consumer's
/// index writer's format).
async fn fill(channel: &lapin::Channel, index: &Dlq, exchange: &str, routing_key: &str, n: usize) {
    const BATCH: usize = 1000;
    let body = vec![b'x'; 1024];
    let mut pending = Vec::with_capacity(BATCH);
    // The batch's properties, for its entries.
    let mut batch = Vec::with_capacity(BATCH);
    for i in 0..n {
        let error = match i % 3 {
            0 => format!("order {i} not found"),
            1 => format!("payment gateway timeout after {i} ms"),
            _ => format!("invalid sku 'A{i}'"),
        };
        let mut headers = FieldTable::default();
        let text = |s: &str| AMQPValue::LongString(s.as_bytes().into());
        headers.insert("x-error".into(), text(&error));
        headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(3));
        headers.insert("x-failed-at".into(), text("2026-12-02T10:00:00.000Z"));
        headers.insert("x-dead-letter-reason".into(), text("exhausted"));
        let properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(format!("m-{i}").into())
            .with_headers(headers);
        let mandatory = BasicPublishOptions {
            mandatory: true,
            ..Default::default()
        };
        let confirm = channel
            .basic_publish(
                exchange.into(),
                routing_key.into(),
                mandatory,
                &body,
                properties.clone(),
            )
            .await
            .expect("publish");
        pending.push(confirm);
        batch.push(properties);
        if pending.len() == BATCH || i + 1 == n {
            for confirm in pending.drain(..) {
                confirmed(confirm, "a dead letter").await;
            }
            // The summary entries of the confirmed dead letters, as the
            // consumer's index writer writes them.
            let written = index
                .write_index_entries(batch.iter().map(|p| (p, body.len())))
                .await
                .expect("the index entries");
            assert_eq!(written, batch.len(), "the index is declared");
            batch.clear();
        }
    }
}

/// Counts what an export writes, as a file would take it.
#[derive(Default)]
struct Counting {
    lines: usize,
    bytes: usize,
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes += buf.len();
        self.lines += buf.iter().filter(|&&b| b == b'\n').count();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts this process's peak resident memory again from what it uses now
/// (Linux: `5` to `/proc/self/clear_refs`), so that each queue version's
/// figure is its own.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// This process's peak resident memory, from /proc.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The broker's memory use (every category of `rabbitmq-diagnostics
/// memory_breakdown` but the reserved and unused), none when it cannot be read
/// or with `BENCH_BROKER_MEMORY=0`.
fn broker_memory_mib() -> Option<f64> {
    if std::env::var("BENCH_BROKER_MEMORY").is_ok_and(|v| v == "0") {
        return None;
    }
    let output = std::process::Command::new("rabbitmq-diagnostics")
        .args([
            "-q",
            "memory_breakdown",
            "--unit",
            "mb",
            "--formatter",
            "json",
        ])
        .output()
        .ok()?;
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let used: f64 = doc
        .as_object()?
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "reserved_unallocated" | "allocated_unused" | "total"
            )
        })
        .filter_map(|(_, v)| v.get("bytes").and_then(serde_json::Value::as_f64))
        .sum();
    Some(used / f64::from(1 << 20))
}

/// CPU seconds used so far by this process and by the broker (the
/// `beam.smp` process, when it runs on this machine).
fn cpu_seconds() -> (f64, f64) {
    let ticks = |stat: &str| -> Option<f64> {
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        Some((utime + stime) / 100.0)
    };
    let own = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| ticks(&s))
        .unwrap_or(0.0);
    let broker = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "beam.smp")
        })
        .filter_map(|e| {
            std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|s| ticks(&s))
        })
        .sum();
    (own, broker)
}

/// CPU seconds of this process and of the broker since `start`.
fn since(start: (f64, f64)) -> (f64, f64) {
    let now = cpu_seconds();
    (now.0 - start.0, now.1 - start.1)
}
