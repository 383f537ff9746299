//! The framework beside hand-written lapin consumers, against the real
//! broker: messages per second, consumer CPU per message and the broker's
//! CPU per message, scenario by scenario, alternating the sides so that the
//! machine's noise falls on all of them. Every run checks that each message
//! was handled or dead-lettered: none lost; and reads up to 20 of its dead
//! letters, each of which must carry the article's `x-retry-count`,
//! `x-error` and `x-failed-at` (on every side, the framework's included).
//!
//! Each side runs in a process of its own (this binary again, with
//! `BENCH_CHILD` set), on a multi-thread tokio runtime as `#[tokio::main]`
//! builds it; its CPU is read from the OS (`getrusage`) over the span from
//! its start to the last message settled, and the broker's from
//! `/proc/<pid>/stat` of the process listening on the broker's port, before
//! and after. A side starts once the broker is quiet (under 5% of a core
//! for half a second), so that no side pays for what the set-up or the run
//! before left the broker to do. `BENCH_PROCESSES=0` runs the sides in this
//! process instead, for profilers (`scripts/bench-instructions.sh`).
//!
//! **Topologies.** The framework's sides run on the topology the framework
//! declares (`declare_topology`, the dead-letter index included, where the
//! framework declares one: beside classic queues), queue `bench.<8 hex>`.
//! Every hand-written side (`article`, `full`, `spawned`, `spawned-full`,
//! `guarded`, `delayed`) runs on the article's own topology, declared by the
//! bench with plain lapin calls, under a prefix `<p>` = `bench.<8 hex>`
//! unique to the run: direct `<p>.work_exchange` → durable
//! `<p>.work_queue` (key `work`; `x-dead-letter-exchange` =
//! `<p>.dlx_exchange`, `x-dead-letter-routing-key` = `dead`, as the article
//! declares it), direct `<p>.retry_exchange` → durable `<p>.retry_<ms>ms`
//! per delay (bound with its own name; `x-message-ttl` = the delay, and an
//! expired retry returns through `<p>.work_exchange` with key `work`),
//! direct `<p>.dlx_exchange` → durable `<p>.dead_letter_queue` (key
//! `dead`). No index, nothing of the framework. On a quorum target the
//! three kinds of queue are `x-queue-type = quorum`, and the work queue has
//! `x-delivery-limit` = the framework's `delivery_limit` (20); the retry
//! queues keep the article's arguments, so they dead-letter at most once,
//! the quorum default, where the framework's are `at-least-once` with
//! `x-overflow = reject-publish`. Every queue and exchange a run declared
//! is deleted after it, on both topologies.
//!
//! The baselines: `article` and `full` are the same loop, handling the
//! deliveries of one consumer with `for_each_concurrent` in its task, and
//! differ only in the headers of a dead letter: `article` writes the three
//! of the article a hand-written consumer is usually copied from
//! (`x-retry-count`, `x-error`, `x-failed-at`); `full` writes the same
//! headers as the framework (those three, `x-dead-letter-reason` and
//! `x-original-queue`/`-exchange`/`-routing-key`, leaving out, as the
//! framework does, an exchange or routing key equal to the queue's name,
//! which on the article's topology they never are), so that the broker
//! stores messages of about the same size; a first retry copy carries only
//! `x-retry-count` in both, as the framework's do without a `max_age`.
//! `spawned` is the stronger loop a careful developer writes on a
//! multi-thread runtime: `article`'s headers, one task spawned per delivery,
//! each awaiting its republish's confirm, then acking; `spawned-full` is the
//! same loop writing `full`'s headers: beside `spawned`, what the
//! framework's headers cost, and against it the framework's loop on equal
//! work. `guarded` (only when named) is `article` over a lapin connection
//! the runtime opened, behind its frame guard.
//!
//! The framework's child process logs as a service does: a
//! `tracing_subscriber::fmt()` subscriber, filtered by `BENCH_LOG` (an
//! `EnvFilter`; default `warn`; `off` installs none), writes a line per
//! event to the child's standard output, a pipe this process reads to its
//! end (the child's report is the line marked `bench-run:`; of the others,
//! the first 3 of a run and their count are echoed to standard error: at
//! `warn` the framework logs its first 10 failures a second one by one,
//! then a line that counts the rest). The hand-written
//! sides install no subscriber; nor does anything with
//! `BENCH_PROCESSES=0`.
//!
//! `scripts/bench.sh` (or `cargo bench --bench throughput`). Settings:
//! `BENCH_N` messages a run (default 10000; S1 and S4 `BENCH_N_S1`, default
//! 100000 or `BENCH_N` when larger, to last long enough to read: at 20 000
//! they take under a second), `BENCH_REPS` runs of each side
//! (default 3), `BENCH_SCENARIOS=S2,S3` to run only some,
//! `BENCH_SIDES=framework,spawned` to run only some of `framework`, `article`,
//! `spawned`, `spawned-full` and `full` (the default set; ratios are printed
//! against each baseline that ran), or the sides run only when named:
//! `guarded`, `framework-unindexed`, `framework-delayed`, `delayed`,
//! `framework-scheduled`, `amqp1-loop`, `dedupe=postgres`, `dedupe=redis`;
//! `BENCH_LOG` the framework's log filter (above),
//! `BENCH_EACH=1` to print every run as it ends (to standard error),
//! `BENCH_PREFETCH` (default: the framework's default prefetch; a list such
//! as `1,10,50` measures each and prints the curve), `BENCH_MEMORY=0` to
//! skip the memory check,
//! `BENCH_TARGETS=single-classic,single-quorum,cluster-quorum` to measure
//! on several brokers and queue types in one run, a table each (default
//! `single-classic`: the local broker, `AMQP_URL`, classic queues;
//! `single-quorum`: the same broker, quorum queues; `cluster-quorum`: the
//! three-node cluster of `scripts/cluster.sh`, or `CLUSTER_AMQP_URL`, with
//! quorum queues replicated on every node, both sides connected to its
//! first node, which leads the queues). Under `cargo test` it runs once with
//! 300 messages, as a test (`BENCH_SIDES`, `BENCH_SCENARIOS`,
//! `BENCH_TARGETS` and `BENCH_LOG` apply there too).
//!
//! `framework-unindexed` (only when named): the framework with its
//! dead-letter index turned off (`dead_letter_index = DeadLetterIndex::Off`):
//! each dead letter written once, to the dead-letter queue, as on the
//! hand-written sides. Its ratios are its own to the framework with the
//! index (throughput, then CPU per message, then the broker's). On a quorum
//! target the framework writes the index itself (`IndexFeed::Written`):
//! there the ratio is what the consumer's second write of each dead letter
//! costs.
//!
//! `delayed` (only when named, on a quorum target of RabbitMQ 4.3): the
//! `article` loop with RabbitMQ 4.3's delayed retries instead of retry
//! tiers, on the article's topology without its retry exchange and queues:
//! the work queue is declared with `x-delayed-retry-type = failed` and
//! `x-delayed-retry-min`/`-max` = the first tier's delay, and a transient
//! failure is `basic.reject(requeue = true)`, which the queue holds back
//! that long (no copy, no `x-retry-count`, no `x-error`). Its row's ratios
//! are the framework's to it, as for the other baselines.
//!
//! `framework-delayed` (only when named, on a quorum target of RabbitMQ
//! 4.3): the framework with `retry = "delayed"`, the backend built on those
//! delayed retries (the same `x-delayed-retry-*` arguments, a transient
//! failure rejected with requeue, a dead letter still a confirmed copy with
//! the framework's headers). Its ratios are its own to the framework with
//! retry tiers (throughput, then CPU per message, then the broker's).
//!
//! `framework-scheduled` (only when named, on a quorum target of RabbitMQ
//! 4.3): the framework with `retry = "scheduled"`: it consumes its quorum
//! work queue over AMQP 1.0 (fe2o3-amqp) and settles a transient failure as
//! `modified` with `x-opt-delivery-time`, which the queue holds back; a
//! dead letter is still a confirmed AMQP 0-9-1 copy with the framework's
//! headers, then `accepted`. Its own topology has no retry queue. Its row's
//! ratios are its own to the framework with retry tiers and to
//! `framework-delayed` (when they ran), and beside each hand-written
//! baseline's row its ratios to that baseline (`scheduled …`).
//!
//! `framework-scheduled-unindexed` (only when named, on a quorum target of
//! RabbitMQ 4.3): `framework-scheduled` with its dead-letter index off, each
//! dead letter written once, as `amqp1-loop` writes it. Its ratios are its
//! own to `framework-scheduled` and to `amqp1-loop`.
//!
//! `amqp1-loop` (only when named, on a quorum target of RabbitMQ 4.3): the
//! strongest loop a careful user of fe2o3-amqp writes with the same
//! settlements ([`amqp1_loop`]), on the article's topology without retry
//! exchange and queues, its work queue declared as docs/amqp-1.0.md says
//! (`x-dead-letter-strategy = at-least-once`, `x-overflow =
//! reject-publish`, the delivery limit 20, above the one retry): a receiver
//! link whose credit keeps the prefetch unsettled, a task per delivery, a
//! retry `modified` with `x-opt-delivery-time` (now + the first delay),
//! `x-opt-retry-count` and `x-opt-error`, a dead letter a confirmed AMQP
//! 0-9-1 copy with the article's three headers, then `accepted` (the
//! framework's way, for a like-for-like comparison, rather than `modified`
//! with `undeliverable-here`, whose dead letter would carry `x-opt-error`
//! where the article promises `x-error`). On any other target or broker
//! (3.10, 4.0, classic queues) both sides are left out of the table, with a
//! line that says so: `BENCH_SIDES` naming them does not fail the run.
//!
//! Two more sides run S1 and S4 only: the framework with `dedupe` on
//! PostgreSQL (`dedupe=postgres`, `DATABASE_URL`, a pool as large as the
//! concurrency) and on Redis (`dedupe=redis`, `REDIS_URL`), each message
//! with its own `message_id`; their ratio is to the framework without
//! dedupe.

#[path = "common/amqp1_connection.rs"]
mod amqp1_connection;
#[path = "common/broker_process.rs"]
mod broker_process;
#[path = "common/child.rs"]
mod child;

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use futures_util::StreamExt;
use futures_util::future::join_all;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicGetOptions, BasicPublishOptions, BasicQosOptions,
    ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use rabbit_backoff::dedupe::{DedupeStore, PostgresStore, RedisStore, sqlx};
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::Topology;
use rabbit_backoff::{DeadLetterIndex, Dedupe, QueueType, RetryBackend, ShutdownHandle};
use rabbit_backoff_core::ConsumerSpec;
use serde::{Deserialize, Serialize};

// ---- the work: identical for both sides ----

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Ok,
    Permanent,
    TransientOnce,
}

#[derive(Debug, Serialize, Deserialize)]
struct Msg {
    id: u64,
    kind: Kind,
}

/// What each run records: per id, how often it was handled successfully.
struct Tally {
    handled: Vec<AtomicU8>,
    ok: AtomicUsize,
    first: OnceLock<Instant>,
}

impl Tally {
    fn new(n: usize) -> Self {
        Tally {
            handled: (0..n).map(|_| AtomicU8::new(0)).collect(),
            ok: AtomicUsize::new(0),
            first: OnceLock::new(),
        }
    }

    fn seen(&self) {
        self.first.get_or_init(Instant::now);
    }

    fn handled(&self, id: u64) {
        if let Some(slot) = self.handled.get(id as usize)
            && slot.fetch_add(1, Ordering::Relaxed) == 0
        {
            self.ok.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[derive(Debug, thiserror::Error, Classify)]
enum BenchError {
    #[error("transient failure")]
    Transient,
    #[permanent]
    #[error("permanent failure")]
    Permanent,
}

#[backoff_consumer(queue = "bench", delays = "1ms")]
async fn framework(msg: Msg, ctx: &Context, tally: State<Tally>) -> Result<(), BenchError> {
    tally.seen();
    match msg.kind {
        Kind::Permanent => Err(BenchError::Permanent),
        Kind::TransientOnce if ctx.retry_count() == 0 => Err(BenchError::Transient),
        _ => {
            tally.handled(msg.id);
            Ok(())
        }
    }
}

/// How a baseline retries a transient failure.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Retries {
    /// A copy to the retry tier, then the ack.
    Tiers,
    /// `basic.reject(requeue = true)` into a queue with 4.3's delayed retries.
    DelayedRequeue,
}

/// Which headers a baseline's dead letters carry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DeadLetterHeaders {
    /// The article's: `x-retry-count`, `x-error`, `x-failed-at`.
    Article,
    /// The framework's: the article's, `x-dead-letter-reason` and
    /// `x-original-queue`/`-exchange`/`-routing-key`, without what the
    /// queue's name implies (an exchange or key equal to it). A first retry
    /// copy carries only its count in both.
    Full,
}

/// The names a run's messages go through, on the framework's topology or
/// on the article's, so that publishing, the hand-written loops, counting
/// the dead letters and deleting work the same for both.
#[derive(Clone, Debug)]
struct Names {
    /// The work exchange and the key the messages are published with.
    exchange: String,
    routing_key: String,
    work_queue: String,
    retry_exchange: String,
    /// The retry queue of the first delay, bound to the retry exchange
    /// with its own name.
    retry_queue: String,
    /// The dead-letter exchange and the key a dead letter is published with.
    dlx: String,
    dlq_key: String,
    dlq: String,
    /// The retry queues with their delays (ms): none when the retries are
    /// not tiers.
    retry_queues: Vec<(u64, String)>,
    /// Every queue the run may have declared, in the order to delete them.
    queues: Vec<String>,
    /// Every exchange the run may have declared.
    exchanges: Vec<String>,
}

impl Names {
    /// The names of `side`'s topology for the run of `spec`: the
    /// framework's, or the article's under the prefix `spec.queue`.
    fn of(side: Side, spec: &ConsumerSpec) -> Self {
        if side.is_framework() {
            Names::framework(spec)
        } else {
            let tiers = !matches!(side, Side::Delayed | Side::Amqp1Loop);
            Names::article(&spec.queue, spec.delays.as_millis(), tiers)
        }
    }

    /// The framework's names, and every queue and exchange its topology
    /// holds, the dead-letter index's streams included.
    fn framework(spec: &ConsumerSpec) -> Self {
        let names = spec.names();
        let topology = Topology::of(spec);
        let mut queues: Vec<String> = Vec::new();
        // The index's streams whether or not this spec declares them: a
        // delete of a queue that is not there is a no-op.
        for queue in topology
            .every_queue()
            .chain(topology.dead_letter_index.queues())
        {
            if !queues.contains(&queue.name) {
                queues.push(queue.name.clone());
            }
        }
        Names {
            exchange: names.exchange.clone(),
            routing_key: names.routing_key.clone(),
            work_queue: names.queue.clone(),
            retry_exchange: names.retry_exchange.clone(),
            retry_queue: names.retry_queue(spec.delays.as_millis()[0]),
            dlx: names.dead_letter_exchange.clone(),
            dlq_key: names.dead_letter_routing_key.clone(),
            dlq: names.dead_letter_queue.clone(),
            retry_queues: spec
                .retry_delays()
                .into_iter()
                .map(|ms| (ms, names.retry_queue(ms)))
                .collect(),
            queues,
            exchanges: topology
                .exchanges()
                .iter()
                .map(|e| e.name.clone())
                .collect(),
        }
    }

    /// The article's names under the prefix `p`: `<p>.work_exchange` →
    /// `<p>.work_queue` (key `work`), `<p>.retry_exchange` →
    /// `<p>.retry_<ms>ms` per delay (when `tiers`), `<p>.dlx_exchange` →
    /// `<p>.dead_letter_queue` (key `dead`).
    fn article(p: &str, delays: &[u64], tiers: bool) -> Self {
        let retry_queue = |ms: u64| format!("{p}.retry_{ms}ms");
        let retry_queues: Vec<(u64, String)> = if tiers {
            delays.iter().map(|&ms| (ms, retry_queue(ms))).collect()
        } else {
            Vec::new()
        };
        let (work_queue, dlq) = (format!("{p}.work_queue"), format!("{p}.dead_letter_queue"));
        let (exchange, retry_exchange, dlx) = (
            format!("{p}.work_exchange"),
            format!("{p}.retry_exchange"),
            format!("{p}.dlx_exchange"),
        );
        let queues = std::iter::once(dlq.clone())
            .chain(retry_queues.iter().map(|(_, q)| q.clone()))
            .chain(std::iter::once(work_queue.clone()))
            .collect();
        let mut exchanges = vec![exchange.clone()];
        if tiers {
            exchanges.push(retry_exchange.clone());
        }
        exchanges.push(dlx.clone());
        Names {
            exchange,
            routing_key: "work".to_owned(),
            work_queue,
            retry_exchange,
            retry_queue: retry_queue(delays[0]),
            dlx,
            dlq_key: "dead".to_owned(),
            dlq,
            retry_queues,
            queues,
            exchanges,
        }
    }
}

/// Where a hand-written loop sends what fails, and how.
struct Route {
    retry_exchange: ShortString,
    retry_key: ShortString,
    dlx: ShortString,
    dlq_key: ShortString,
    queue: String,
    dead_letter_headers: DeadLetterHeaders,
    retries: Retries,
}

impl Route {
    fn of(names: &Names, dead_letter_headers: DeadLetterHeaders, retries: Retries) -> Self {
        Route {
            retry_exchange: names.retry_exchange.as_str().into(),
            retry_key: names.retry_queue.as_str().into(),
            dlx: names.dlx.as_str().into(),
            dlq_key: names.dlq_key.as_str().into(),
            queue: names.work_queue.clone(),
            dead_letter_headers,
            retries,
        }
    }
}

/// A channel of a hand-written loop: publisher confirms, the prefetch,
/// consuming the work queue.
async fn consuming(
    connection: &Connection,
    spec: &ConsumerSpec,
    names: &Names,
) -> (Channel, lapin::Consumer) {
    let channel = connection.create_channel().await.expect("channel");
    channel
        .confirm_select(Default::default())
        .await
        .expect("confirms");
    channel
        .basic_qos(spec.prefetch, BasicQosOptions::default())
        .await
        .expect("qos");
    let consumer = channel
        .basic_consume(
            names.work_queue.as_str().into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    (channel, consumer)
}

/// The loop a careful developer writes by hand with lapin: same prefetch,
/// same concurrency, a confirm awaited per republish, then the ack; the
/// deliveries handled with `for_each_concurrent` in the consumer's task.
async fn baseline(
    connection: &Connection,
    spec: ConsumerSpec,
    names: Names,
    tally: Arc<Tally>,
    stop: ShutdownHandle,
    dead_letter_headers: DeadLetterHeaders,
    retries: Retries,
) {
    let (channel, consumer) = consuming(connection, &spec, &names).await;
    let route = Route::of(&names, dead_letter_headers, retries);
    consumer
        .take_until(stop.wait())
        .for_each_concurrent(spec.effective_concurrency(), |delivery| {
            let (channel, tally, route) = (&channel, &tally, &route);
            async move {
                if let Ok(delivery) = delivery {
                    handle_delivery(channel, delivery, tally, route).await;
                }
            }
        })
        .await;
    closed(channel.close(200, "".into())).await;
}

/// The stronger hand-written loop: one task spawned per delivery on the
/// multi-thread runtime (the prefetch bounds how many are in flight), each
/// awaiting its republish's confirm, then acking: the handlers of one
/// channel run on every worker thread.
async fn baseline_spawned(
    connection: &Connection,
    spec: ConsumerSpec,
    names: Names,
    tally: Arc<Tally>,
    stop: ShutdownHandle,
    dead_letter_headers: DeadLetterHeaders,
) {
    let (channel, mut consumer) = consuming(connection, &spec, &names).await;
    let route = Arc::new(Route::of(&names, dead_letter_headers, Retries::Tiers));
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let delivery = tokio::select! {
            _ = stop.wait() => break,
            delivery = consumer.next() => delivery,
        };
        let Some(Ok(delivery)) = delivery else { break };
        let (channel, tally, route) = (channel.clone(), tally.clone(), route.clone());
        tasks.spawn(async move { handle_delivery(&channel, delivery, &tally, &route).await });
        // Finished tasks are reaped as they go: the set stays as small as
        // the prefetch.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    closed(channel.close(200, "".into())).await;
}

/// One delivery of a hand-written loop: decode, decide, republish a copy
/// with its confirm awaited (nack with requeue when it is not confirmed),
/// then ack.
async fn handle_delivery(
    channel: &Channel,
    delivery: lapin::message::Delivery,
    tally: &Tally,
    route: &Route,
) {
    let Route {
        retry_exchange,
        retry_key,
        dlx,
        dlq_key,
        queue,
        dead_letter_headers,
        retries,
    } = route;
    let (dead_letter_headers, retries) = (*dead_letter_headers, *retries);
    tally.seen();
    let count = match delivery
        .properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get("x-retry-count"))
    {
        Some(AMQPValue::LongLongInt(n)) => *n,
        _ => 0,
    };
    let msg: Msg = serde_json::from_slice(&delivery.data).expect("bench payload");
    if retries == Retries::DelayedRequeue
        && msg.kind == Kind::TransientOnce
        && !matches!(
            delivery.properties.headers().as_ref().and_then(|h| h.inner().get("x-delivery-count")),
            Some(AMQPValue::LongLongInt(n)) if *n > 0
        )
    {
        let _ = delivery
            .acker
            .reject(lapin::options::BasicRejectOptions { requeue: true })
            .await;
        return;
    }
    let republish = match msg.kind {
        Kind::Permanent => Some((dlx, dlq_key, count, Some("permanent failure"))),
        Kind::TransientOnce if count == 0 && retries == Retries::Tiers => {
            Some((retry_exchange, retry_key, count + 1, None))
        }
        _ => None,
    };
    if let Some((exchange, key, new_count, error)) = republish {
        let mut headers = delivery.properties.headers().clone().unwrap_or_default();
        // The count always, 0 included, in the article's as in the
        // framework's dead letters.
        headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(new_count));
        // A retry copy here is always a first one, which carries only its
        // count, in `full` as in the framework's (without a `max_age`).
        if let Some(error) = error {
            let failed_at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
            headers.insert(
                "x-error".into(),
                AMQPValue::LongString(LongString::from(error.as_bytes())),
            );
            headers.insert(
                "x-failed-at".into(),
                AMQPValue::LongString(failed_at.into_bytes().into()),
            );
            if dead_letter_headers == DeadLetterHeaders::Full {
                // What the framework's dead letters say besides: why, and where from.
                let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes()));
                headers.insert("x-dead-letter-reason".into(), text("permanent"));
                headers.insert("x-original-queue".into(), text(queue));
                for (name, value) in [
                    ("x-original-exchange", delivery.exchange.as_str()),
                    ("x-original-routing-key", delivery.routing_key.as_str()),
                ] {
                    if value != queue.as_str() {
                        headers.insert(name.into(), text(value));
                    }
                }
            }
        }
        let properties = delivery
            .properties
            .clone()
            .with_headers(headers)
            .with_delivery_mode(2);
        let confirm = channel
            .basic_publish(
                exchange.clone(),
                key.clone(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                &delivery.data,
                properties,
            )
            .await;
        let confirmed = match confirm {
            Ok(confirm) => matches!(confirm.await, Ok(lapin::Confirmation::Ack(None))),
            Err(_) => false,
        };
        if !confirmed {
            let _ = delivery
                .acker
                .nack(lapin::options::BasicNackOptions {
                    requeue: true,
                    multiple: false,
                })
                .await;
            return;
        }
    } else {
        tally.handled(msg.id);
    }
    let _ = delivery.acker.ack(BasicAckOptions::default()).await;
}

// ---- the hand-written AMQP 1.0 loop ----

/// `AMQP_URL` without its path, as fe2o3-amqp takes it: the address and the
/// SASL PLAIN credentials; RabbitMQ 4 picks the default vhost when the open
/// frame names none (as `tests/broker_held_retry.rs` connects).
fn amqp10_url(node: &str) -> String {
    let (scheme, rest) = node.split_once("://").unwrap_or(("amqp", node));
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    format!("{scheme}://{authority}")
}

/// How the hand-written AMQP 1.0 loop settles a delivery.
enum Settle {
    Accept,
    /// Back to the queue, not counted as failed: a dead-letter copy that
    /// was not confirmed (the `spawned` loop's nack with requeue).
    Release,
    /// A retry held back by the queue until its `x-opt-delivery-time`.
    Modify(fe2o3_amqp::types::messaging::Modified),
}

/// What the handler tasks of the AMQP 1.0 loop share.
struct Amqp1Work {
    /// A confirm channel for the dead-letter copies.
    copies: Channel,
    dlx: ShortString,
    dlq_key: ShortString,
    /// The schedule: the delay of retry `n` (from 0) is `delays[n]`.
    delays: Vec<u64>,
    tally: Arc<Tally>,
    settled:
        tokio::sync::mpsc::UnboundedSender<(u64, fe2o3_amqp::link::delivery::DeliveryInfo, Settle)>,
}

/// The strongest loop a careful user of fe2o3-amqp writes for RabbitMQ
/// 4.3's held-back retries, with the framework's settlements: a receiver
/// link on the work queue whose credit keeps at most `prefetch` deliveries
/// unsettled (granted again in batches of half, as the framework's link
/// does; fe2o3's `CreditMode::Auto` would let 1.5 × prefetch be
/// unsettled), a task spawned per delivery on the multi-thread runtime
/// (the `spawned` loop's concurrency), each decoding the JSON payload and
/// sending its settlement back to the link's task, which owns the
/// `Receiver` (receiving needs `&mut`) and settles what is ready at once:
/// the accepted ones as one disposition per range of consecutive delivery
/// ids (`accept_all`), a retry as `modified` with `x-opt-delivery-time`
/// (now + the schedule's delay), `x-opt-retry-count` and `x-opt-error`. A
/// dead letter (a permanent failure, or the retries used up) is what the
/// framework does: a copy with the article's `x-retry-count`, `x-error`
/// and `x-failed-at` published over AMQP 0-9-1 on `connection` with its
/// confirm awaited, then `accepted`; `released` when it is not confirmed.
///
/// RabbitMQ 4.3 answers a link's first credit request with a `flow` (the
/// consumer is active); fe2o3-amqp 0.18 applies its delivery count while
/// transfers may still wait in the link's buffer, counts them twice and
/// drops what then comes beyond its own count (`TransferLimitExceeded`).
/// As the framework does (and a careful user who met it would), the loop
/// first grants no credit and waits 10 ms for that flow before it grants
/// its credit; should a link drop transfers all the same, it grants no
/// more credit, lets the deliveries it took be settled, and replaces the
/// link: the broker returns the dropped messages to the queue. Another
/// error ends the link: the loop attaches a new one, and the settlements of
/// the old link's deliveries are dropped.
async fn amqp1_loop(
    url: &str,
    connection: &Connection,
    spec: ConsumerSpec,
    names: Names,
    tally: Arc<Tally>,
    stop: ShutdownHandle,
) {
    use fe2o3_amqp::link::Receiver;
    use fe2o3_amqp::link::receiver::CreditMode;
    use fe2o3_amqp::types::messaging::Body;
    use fe2o3_amqp::types::primitives::Value;

    let copies = connection.create_channel().await.expect("channel");
    copies
        .confirm_select(Default::default())
        .await
        .expect("confirms");
    let container = format!("bench-amqp1-loop-{}", uuid::Uuid::new_v4().simple());
    // Its own socket, with Nagle's algorithm off.
    let mut amqp = amqp1_connection::open(url, container).await;
    let mut session = fe2o3_amqp::Session::begin(&mut amqp)
        .await
        .expect("an AMQP 1.0 session");
    let prefetch = u32::from(spec.prefetch).max(1);
    let source = format!("/queues/{}", names.work_queue);
    let mut generation = 0u64;
    // A receiver with `prefetch` credit, named after its generation.
    async fn attach(
        session: &mut fe2o3_amqp::session::SessionHandle<()>,
        source: &str,
        generation: u64,
        prefetch: u32,
    ) -> Receiver {
        let mut receiver = Receiver::builder()
            .name(format!("bench-amqp1-loop-{generation}"))
            .source(source)
            .credit_mode(CreditMode::Manual)
            .attach(session)
            .await
            .expect("a receiver on the work queue");
        receiver.set_credit(0).await.expect("no credit");
        tokio::time::sleep(Duration::from_millis(10)).await;
        receiver.set_credit(prefetch).await.expect("credit");
        receiver
    }
    let mut receiver = attach(&mut session, &source, generation, prefetch).await;
    let (settled, mut settlements) = tokio::sync::mpsc::unbounded_channel();
    let work = Arc::new(Amqp1Work {
        copies,
        dlx: names.dlx.as_str().into(),
        dlq_key: names.dlq_key.as_str().into(),
        delays: spec.delays.as_millis().to_vec(),
        tally,
        settled,
    });
    let mut tasks = tokio::task::JoinSet::new();
    let mut unsettled: u32 = 0;
    // Transfers fe2o3-amqp dropped on the current link.
    let mut dropped: u32 = 0;
    let stopping = stop.wait();
    tokio::pin!(stopping);
    loop {
        if dropped > 0 && unsettled == 0 {
            // Every delivery taken is settled: a new link, and the broker
            // returns the dropped messages as the old one detaches.
            generation += 1;
            let new = attach(&mut session, &source, generation, prefetch).await;
            let old = std::mem::replace(&mut receiver, new);
            let _ = tokio::time::timeout(Duration::from_secs(5), old.close()).await;
            dropped = 0;
        }
        tokio::select! {
            biased;
            _ = &mut stopping => break,
            Some(first) = settlements.recv() => {
                // Everything the handlers settled since: the accepted ones
                // in one go.
                let mut accepted = Vec::new();
                let mut next = Some(first);
                while let Some((of, info, settle)) = next {
                    if of != generation {
                        // Back in the queue since that link ended.
                        next = settlements.try_recv().ok();
                        continue;
                    }
                    unsettled -= 1;
                    let disposed = match settle {
                        Settle::Accept => {
                            accepted.push(info);
                            Ok(())
                        }
                        Settle::Release => receiver.release(info).await,
                        Settle::Modify(modified) => receiver.modify(info, modified).await,
                    };
                    disposed.expect("settle");
                    next = settlements.try_recv().ok();
                }
                if !accepted.is_empty() {
                    receiver.accept_all(accepted).await.expect("accept");
                }
                if dropped > 0 {
                    // No credit until the link is replaced.
                    continue;
                }
                // Credit up to `prefetch` unsettled, in batches of half.
                let wanted = prefetch - unsettled;
                if wanted > receiver.credit()
                    && wanted - receiver.credit() >= (prefetch / 2).max(1)
                {
                    receiver.set_credit(wanted).await.expect("credit");
                }
            }
            delivery = receiver.recv::<Body<Value>>() => {
                let delivery = match delivery {
                    Ok(delivery) => delivery,
                    Err(fe2o3_amqp::link::RecvError::TransferLimitExceeded) => {
                        dropped += 1;
                        continue;
                    }
                    Err(e) => {
                        eprintln!("amqp1-loop: the link ended ({e:?}); attaching another");
                        let _ = tokio::time::timeout(Duration::from_secs(5), receiver.close()).await;
                        generation += 1;
                        unsettled = 0;
                        dropped = 0;
                        receiver = attach(&mut session, &source, generation, prefetch).await;
                        continue;
                    }
                };
                unsettled += 1;
                let work = work.clone();
                tasks.spawn(async move {
                    let (info, message) = delivery.into_parts();
                    let settle = handle_amqp1(&work, message).await;
                    let _ = work.settled.send((generation, info, settle));
                });
                while tasks.try_join_next().is_some() {}
            }
        }
    }
    tasks.abort_all();
    let _ = tokio::time::timeout(Duration::from_secs(5), receiver.close()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), session.end()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), amqp.close()).await;
    closed(work.copies.close(200, "".into())).await;
}

/// One delivery of the AMQP 1.0 loop: decode, decide, and for a dead letter
/// publish the copy and await its confirm; the settlement to send.
async fn handle_amqp1(
    work: &Amqp1Work,
    message: fe2o3_amqp::types::messaging::Message<
        fe2o3_amqp::types::messaging::Body<fe2o3_amqp::types::primitives::Value>,
    >,
) -> Settle {
    use fe2o3_amqp::types::messaging::annotations::AnnotationKey;
    use fe2o3_amqp::types::messaging::{Body, MessageId, Modified};
    use fe2o3_amqp::types::primitives::{OrderedMap, Symbol, Timestamp, Value};

    work.tally.seen();
    // What AMQP 0-9-1 published arrives as one data section.
    let data: &[u8] = match &message.body {
        Body::Data(sections) => sections.first().map_or(&[], |d| d.0.as_slice()),
        _ => &[],
    };
    let msg: Msg = serde_json::from_slice(data).expect("bench payload");
    // The broker gives the count back as a `long`, whatever it was sent as.
    let count = match message
        .message_annotations
        .as_ref()
        .and_then(|a| a.get(&"x-opt-retry-count" as &dyn AnnotationKey))
    {
        Some(Value::Long(n)) => *n,
        Some(Value::Uint(n)) => i64::from(*n),
        Some(Value::Ulong(n)) => i64::try_from(*n).unwrap_or(i64::MAX),
        _ => 0,
    };
    let retries = work.delays.len() as i64;
    let error = match msg.kind {
        Kind::Permanent => "permanent failure",
        Kind::TransientOnce if count == 0 => "transient failure",
        _ => {
            work.tally.handled(msg.id);
            return Settle::Accept;
        }
    };
    if msg.kind == Kind::TransientOnce && count < retries {
        let delay = work.delays[count as usize];
        let at = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is past 1970")
            .as_millis() as i64
            + delay as i64;
        let mut annotations = OrderedMap::new();
        annotations.insert(
            Symbol::from("x-opt-delivery-time"),
            Value::Timestamp(Timestamp::from_milliseconds(at)),
        );
        annotations.insert(
            Symbol::from("x-opt-retry-count"),
            Value::Uint(count as u32 + 1),
        );
        annotations.insert(Symbol::from("x-opt-error"), Value::String(error.to_owned()));
        return Settle::Modify(Modified {
            delivery_failed: Some(true),
            undeliverable_here: Some(false),
            message_annotations: Some(annotations),
        });
    }
    // A dead letter: the copy with the article's headers, confirmed.
    let mut headers = FieldTable::default();
    headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(count));
    headers.insert(
        "x-error".into(),
        AMQPValue::LongString(LongString::from(error.as_bytes())),
    );
    let failed_at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    headers.insert(
        "x-failed-at".into(),
        AMQPValue::LongString(failed_at.into_bytes().into()),
    );
    let mut properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(headers);
    if let Some(p) = &message.properties {
        if let Some(MessageId::String(id)) = &p.message_id {
            properties = properties.with_message_id(id.as_str().into());
        }
        if let Some(content_type) = &p.content_type {
            properties = properties.with_content_type(content_type.as_str().into());
        }
    }
    let confirm = work
        .copies
        .basic_publish(
            work.dlx.clone(),
            work.dlq_key.clone(),
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            data,
            properties,
        )
        .await;
    let confirmed = match confirm {
        Ok(confirm) => matches!(confirm.await, Ok(lapin::Confirmation::Ack(None))),
        Err(_) => false,
    };
    if confirmed {
        Settle::Accept
    } else {
        Settle::Release
    }
}

// ---- scenarios and measurement ----

#[derive(Clone, Copy)]
struct Scenario {
    name: &'static str,
    what: &'static str,
    kind: fn(u64) -> Kind,
}

impl Scenario {
    /// How many of the messages `0..n` fail for good: the dead letters a
    /// run of `n` ends with.
    fn permanent_among(self, n: u64) -> usize {
        (0..n)
            .filter(|&id| (self.kind)(id) == Kind::Permanent)
            .count()
    }
}

const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "S1",
        what: "every message succeeds",
        kind: |_| Kind::Ok,
    },
    Scenario {
        name: "S2",
        what: "every message fails permanently",
        kind: |_| Kind::Permanent,
    },
    Scenario {
        name: "S3",
        what: "every message fails once, then succeeds",
        kind: |_| Kind::TransientOnce,
    },
    Scenario {
        name: "S4",
        what: "90% succeed, 8% fail once, 2% fail permanently",
        kind: |id| match id % 100 {
            0..=89 => Kind::Ok,
            90..=97 => Kind::TransientOnce,
            _ => Kind::Permanent,
        },
    },
];

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Framework,
    /// The hand-written loop with the article's three dead-letter headers.
    Article,
    /// The hand-written loop with the framework's dead-letter headers.
    Full,
    /// `article` over a lapin connection the runtime opened, behind its frame
    /// guard: beside `article`, what the guard costs. Only when named in
    /// `BENCH_SIDES`.
    Guarded,
    /// The framework with `dedupe` on PostgreSQL. Only when named.
    DedupePostgres,
    /// The framework with `dedupe` on Redis. Only when named.
    DedupeRedis,
    /// `article` with RabbitMQ 4.3's delayed retries instead of tiers. Only
    /// when named.
    Delayed,
    /// The stronger hand-written loop: `article`'s headers, a task spawned
    /// per delivery on the multi-thread runtime.
    Spawned,
    /// `spawned` with the framework's headers (`full`'s).
    SpawnedFull,
    /// The framework with `retry = "delayed"`. Only when named.
    FrameworkDelayed,
    /// The framework with its dead-letter index off. Only when named.
    FrameworkUnindexed,
    /// The framework with `retry = "scheduled"`: consumed over AMQP 1.0, a
    /// retry settled as `modified` with `x-opt-delivery-time`. Only when
    /// named, on a quorum target of RabbitMQ 4.3.
    FrameworkScheduled,
    /// `framework-scheduled` with its dead-letter index off. Only when
    /// named, on a quorum target of RabbitMQ 4.3.
    FrameworkScheduledUnindexed,
    /// The hand-written fe2o3-amqp loop with the same settlements as
    /// `framework-scheduled`. Only when named, on a quorum target of
    /// RabbitMQ 4.3.
    Amqp1Loop,
}

impl Side {
    const ALL: [Side; 14] = [
        Side::Framework,
        Side::Article,
        Side::Spawned,
        Side::SpawnedFull,
        Side::Full,
        Side::Guarded,
        Side::DedupePostgres,
        Side::DedupeRedis,
        Side::Delayed,
        Side::FrameworkDelayed,
        Side::FrameworkUnindexed,
        Side::FrameworkScheduled,
        Side::FrameworkScheduledUnindexed,
        Side::Amqp1Loop,
    ];
    const DEFAULT: [Side; 5] = [
        Side::Framework,
        Side::Article,
        Side::Spawned,
        Side::SpawnedFull,
        Side::Full,
    ];

    fn name(self) -> &'static str {
        match self {
            Side::Framework => "framework",
            Side::Article => "article",
            Side::Full => "full",
            Side::Guarded => "guarded",
            Side::DedupePostgres => "dedupe=postgres",
            Side::DedupeRedis => "dedupe=redis",
            Side::Delayed => "delayed",
            Side::Spawned => "spawned",
            Side::SpawnedFull => "spawned-full",
            Side::FrameworkDelayed => "framework-delayed",
            Side::FrameworkUnindexed => "framework-unindexed",
            Side::FrameworkScheduled => "framework-scheduled",
            Side::FrameworkScheduledUnindexed => "framework-scheduled-unindexed",
            Side::Amqp1Loop => "amqp1-loop",
        }
    }

    /// Whether it is the framework (which runs on its own topology, the
    /// index included unless it is turned off); the others are hand-written
    /// loops on the article's topology.
    fn is_framework(self) -> bool {
        matches!(
            self,
            Side::Framework
                | Side::FrameworkDelayed
                | Side::FrameworkUnindexed
                | Side::FrameworkScheduled
                | Side::FrameworkScheduledUnindexed
                | Side::DedupePostgres
                | Side::DedupeRedis
        )
    }

    /// Whether it needs a quorum target on RabbitMQ 4.3 or later, which
    /// holds a `modified` delivery back until its `x-opt-delivery-time`:
    /// elsewhere it is left out of the table (with a line that says so).
    fn needs_scheduled_retries(self) -> bool {
        matches!(
            self,
            Side::FrameworkScheduled | Side::FrameworkScheduledUnindexed | Side::Amqp1Loop
        )
    }

    /// What the side changes in the framework's spec of a run: its retry
    /// backend, or its index.
    fn configure(self, spec: &mut ConsumerSpec) {
        match self {
            Side::FrameworkDelayed => spec.retry = RetryBackend::Delayed,
            Side::FrameworkScheduled => spec.retry = RetryBackend::Scheduled,
            Side::FrameworkUnindexed => spec.dead_letter_index = DeadLetterIndex::Off,
            Side::FrameworkScheduledUnindexed => {
                spec.retry = RetryBackend::Scheduled;
                spec.dead_letter_index = DeadLetterIndex::Off;
            }
            _ => {}
        }
    }

    fn dedupe(self) -> bool {
        matches!(self, Side::DedupePostgres | Side::DedupeRedis)
    }

    /// Whether it runs `scenario`: the dedupe sides run S1 and S4.
    fn runs(self, scenario: Scenario) -> bool {
        !self.dedupe() || matches!(scenario.name, "S1" | "S4")
    }
}

/// How long the dedupe sides remember a key: past the end of a run.
const DEDUPE_WINDOW: Duration = Duration::from_secs(600);

fn postgres_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The store of a dedupe side, its pool as large as the concurrency.
async fn dedupe_store(side: Side, prefetch: u16) -> Arc<dyn DedupeStore> {
    match side {
        Side::DedupePostgres => {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(u32::from(prefetch))
                .test_before_acquire(false)
                .connect(&postgres_url())
                .await
                .expect("PostgreSQL answers (scripts/bench.sh starts it)");
            Arc::new(PostgresStore::from_pool(pool))
        }
        _ => {
            let url =
                std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            Arc::new(RedisStore::connect(&url).await.expect("Redis address"))
        }
    }
}

struct Sample {
    rate: f64,
    cpu_us: f64,
    /// The broker's CPU per message, when its process was found.
    broker_us: Option<f64>,
    duplicates: usize,
}

/// Where a table is measured: a broker (one node or a cluster's list) and
/// the type of the queues.
#[derive(Clone)]
struct Target {
    name: &'static str,
    /// An address or a comma-separated list, as `AMQP_URL` takes it.
    url: String,
    queue_type: QueueType,
}

impl Target {
    const NAMES: [&'static str; 3] = ["single-classic", "single-quorum", "cluster-quorum"];

    fn named(name: &str) -> Option<Target> {
        let single = rabbit_backoff::amqp_url_from_env;
        let cluster = || {
            std::env::var("CLUSTER_AMQP_URL").unwrap_or_else(|_| {
                (5673..=5675)
                    .map(|port| format!("amqp://guest:guest@127.0.0.1:{port}/%2f"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
        };
        let (name, url, queue_type) = match name {
            "single-classic" => ("single-classic", single(), QueueType::Classic),
            "single-quorum" => ("single-quorum", single(), QueueType::Quorum),
            "cluster-quorum" => ("cluster-quorum", cluster(), QueueType::Quorum),
            _ => return None,
        };
        Some(Target {
            name,
            url,
            queue_type,
        })
    }

    /// The node both sides connect to: the first of the list.
    fn first_node(&self) -> &str {
        self.url.split(',').next().unwrap_or(&self.url).trim()
    }
}

/// Awaits a close of the bench's own lapin connections and channels for at
/// most 5 s, its outcome ignored: lapin can miss the broker's `close-ok` when
/// the socket closes right behind it, and then the close never resolves (the
/// bench's parent hung that way twice in an hour, with no socket left open).
/// The framework's own closes are bounded by the connection's lost watch.
async fn closed(close: impl std::future::Future<Output = lapin::Result<()>>) {
    let _ = tokio::time::timeout(Duration::from_secs(5), close).await;
}

/// A lapin connection to `target`'s first node; an attempt that has not
/// connected in 10 s is given up for another (three in all), as [`closed`]
/// bounds a close.
async fn connect(target: &Target) -> Connection {
    for _ in 0..3 {
        let attempt = Connection::connect(target.first_node(), ConnectionProperties::default());
        if let Ok(connected) = tokio::time::timeout(Duration::from_secs(10), attempt).await {
            return connected.unwrap_or_else(|e| {
                panic!(
                    "no RabbitMQ at {} ({e}); scripts/bench.sh starts one (and the cluster for \
                     cluster-quorum: scripts/cluster.sh up)",
                    target.first_node()
                )
            });
        }
    }
    panic!("connecting to {} hung three times", target.first_node())
}

/// Marks the start of the measured span of a run: the consumer is started
/// next, nothing of the set-up follows. Does nothing; under callgrind,
/// `--zero-before='*measured_span_starts' --dump-before='*measured_span_ends'`
/// keeps the instructions of this span only (see PERFORMANCE.md).
#[inline(never)]
fn measured_span_starts() {
    std::hint::black_box(1);
}

/// Marks the end of the measured span of a run (see [`measured_span_starts`]).
#[inline(never)]
fn measured_span_ends() {
    std::hint::black_box(2);
}

/// User plus system CPU time of this process.
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Publishes messages `ids` of `scenario` to the work exchange of
/// `names`, persistent, with pipelined confirms.
async fn prepublish(
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

/// The depth of `queue`, by a passive declare on `channel` (one channel for
/// the whole run: opening one per poll cost more CPU than a message).
async fn depth(channel: &Channel, queue: &str) -> u32 {
    let q = channel
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("passive declare");
    q.message_count()
}

/// Deletes every queue and exchange of `names`: what the run declared,
/// on either topology.
async fn delete(connection: &Connection, names: &Names) {
    let channel = connection.create_channel().await.expect("channel");
    for queue in &names.queues {
        let _ = channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    for exchange in &names.exchanges {
        let _ = channel
            .exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
            .await;
    }
    closed(channel.close(200, "".into())).await;
}

/// The spec of a run of `side`: the framework's, with a queue name unique
/// to the run (on a hand-written side, the prefix of the article's names),
/// the target's queue type and what the side changes.
fn spec_for(target: &Target, prefetch: u16, side: Side) -> ConsumerSpec {
    let mut spec = framework.spec().with_prefetch(prefetch);
    spec.queue = format!("bench.{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    spec.queue_type = Some(target.queue_type);
    side.configure(&mut spec);
    spec
}

/// Starts one side; returns the handle that stops it and its task.
async fn start(
    target: &Target,
    side: Side,
    spec: &ConsumerSpec,
    names: &Names,
    tally: &Arc<Tally>,
) -> (ShutdownHandle, tokio::task::JoinHandle<()>) {
    match side {
        Side::Framework
        | Side::FrameworkDelayed
        | Side::FrameworkUnindexed
        | Side::FrameworkScheduled
        | Side::FrameworkScheduledUnindexed
        | Side::DedupePostgres
        | Side::DedupeRedis => {
            let mut builder = Runtime::builder()
                .uri(target.url.clone())
                .state_arc(tally.clone())
                .handle_signals(false);
            let mut spec = spec.clone();
            if side.dedupe() {
                builder = builder.dedupe_store(dedupe_store(side, spec.prefetch).await);
                spec.dedupe = Some(Dedupe::new(DEDUPE_WINDOW));
            }
            let runtime = builder
                .consumer_with(framework, |s| *s = spec)
                .build()
                .expect("runtime");
            let stop = runtime.shutdown_handle();
            let task = tokio::spawn(async move { runtime.run().await.expect("the runtime runs") });
            (stop, task)
        }
        Side::Article | Side::Full => {
            let headers = if side == Side::Article {
                DeadLetterHeaders::Article
            } else {
                DeadLetterHeaders::Full
            };
            let stop = ShutdownHandle::default();
            let connection = connect(target).await;
            let (spec, names, tally, stop2) =
                (spec.clone(), names.clone(), tally.clone(), stop.clone());
            let task = tokio::spawn(async move {
                baseline(
                    &connection,
                    spec,
                    names,
                    tally,
                    stop2,
                    headers,
                    Retries::Tiers,
                )
                .await;
                closed(connection.close(200, "".into())).await;
            });
            (stop, task)
        }
        Side::Guarded => {
            let stop = ShutdownHandle::default();
            let connection = rabbit_backoff::transport::AmqpTransport::new(target.first_node())
                .connect_amqp()
                .await
                .expect("the runtime's connection");
            let (spec, names, tally, stop2) =
                (spec.clone(), names.clone(), tally.clone(), stop.clone());
            let task = tokio::spawn(async move {
                let lapin = connection.lapin();
                baseline(
                    lapin,
                    spec,
                    names,
                    tally,
                    stop2,
                    DeadLetterHeaders::Article,
                    Retries::Tiers,
                )
                .await;
                closed(lapin.close(200, "".into())).await;
            });
            (stop, task)
        }
        Side::Spawned | Side::SpawnedFull => {
            let headers = if side == Side::Spawned {
                DeadLetterHeaders::Article
            } else {
                DeadLetterHeaders::Full
            };
            let stop = ShutdownHandle::default();
            let connection = connect(target).await;
            let (spec, names, tally, stop2) =
                (spec.clone(), names.clone(), tally.clone(), stop.clone());
            let task = tokio::spawn(async move {
                baseline_spawned(&connection, spec, names, tally, stop2, headers).await;
                closed(connection.close(200, "".into())).await;
            });
            (stop, task)
        }
        Side::Delayed => {
            let stop = ShutdownHandle::default();
            let connection = connect(target).await;
            let (spec, names, tally, stop2) =
                (spec.clone(), names.clone(), tally.clone(), stop.clone());
            let task = tokio::spawn(async move {
                baseline(
                    &connection,
                    spec,
                    names,
                    tally,
                    stop2,
                    DeadLetterHeaders::Article,
                    Retries::DelayedRequeue,
                )
                .await;
                closed(connection.close(200, "".into())).await;
            });
            (stop, task)
        }
        Side::Amqp1Loop => {
            let stop = ShutdownHandle::default();
            // AMQP 0-9-1 for the dead-letter copies, AMQP 1.0 to consume.
            let connection = connect(target).await;
            let url = amqp10_url(target.first_node());
            let (spec, names, tally, stop2) =
                (spec.clone(), names.clone(), tally.clone(), stop.clone());
            let task = tokio::spawn(async move {
                amqp1_loop(&url, &connection, spec, names, tally, stop2).await;
                closed(connection.close(200, "".into())).await;
            });
            (stop, task)
        }
    }
}

/// Declares the topology `side` runs on: the framework's with the
/// framework's own connection, or the article's with plain lapin calls.
async fn declare(target: &Target, spec: &ConsumerSpec, names: &Names, side: Side) {
    if side.is_framework() {
        declare_framework(target, spec, side).await;
    } else {
        declare_article(target, spec, names, side).await;
    }
}

/// Whether `target`'s broker holds a `modified` delivery back until its
/// `x-opt-delivery-time` (RabbitMQ 4.3 and later), asked as the framework
/// asks it before it declares anything for `retry = "scheduled"`: a broker
/// that applies the delayed retry arguments of 4.3's quorum queues refuses
/// them on a classic queue (`PRECONDITION_FAILED`); 3.10 and 4.0 accept
/// them as any unknown argument.
async fn holds_back(target: &Target) -> bool {
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes()));
    let connection = connect(target).await;
    let channel = connection.create_channel().await.expect("channel");
    let probe = format!("bench.probe.{}", uuid::Uuid::new_v4().simple());
    let mut arguments = FieldTable::default();
    arguments.insert("x-delayed-retry-type".into(), text("failed"));
    arguments.insert("x-delayed-retry-min".into(), AMQPValue::LongLongInt(1));
    arguments.insert("x-expires".into(), AMQPValue::LongLongInt(60_000));
    let declared = channel
        .queue_declare(
            probe.as_str().into(),
            QueueDeclareOptions::default(),
            arguments,
        )
        .await;
    let holds = match declared {
        Err(e) => e.to_string().contains("x-delayed-retry"),
        Ok(_) => {
            let _ = channel
                .queue_delete(probe.as_str().into(), QueueDeleteOptions::default())
                .await;
            closed(channel.close(200, "".into())).await;
            false
        }
    };
    closed(connection.close(200, "".into())).await;
    holds
}

/// The sides of `sides` that run on `target`: those that need RabbitMQ
/// 4.3's held-back retries only on a quorum target of a broker that holds
/// back (a line says which are left out, and why).
async fn sides_on(target: &Target, sides: &[Side]) -> Vec<Side> {
    let needing: Vec<&str> = sides
        .iter()
        .filter(|side| side.needs_scheduled_retries())
        .map(|side| side.name())
        .collect();
    if needing.is_empty() {
        return sides.to_vec();
    }
    let why = if target.queue_type != QueueType::Quorum {
        Some("classic queues")
    } else if !holds_back(target).await {
        Some("a broker before RabbitMQ 4.3, which does not hold a `modified` delivery back")
    } else {
        None
    };
    match why {
        None => sides.to_vec(),
        Some(why) => {
            println!(
                "{}: {} left out: they need a quorum target on RabbitMQ 4.3; this is {why}",
                target.name,
                needing.join(", ")
            );
            sides
                .iter()
                .copied()
                .filter(|side| !side.needs_scheduled_retries())
                .collect()
        }
    }
}

/// The framework's topology, as a consumer of `spec` declares it (the
/// dead-letter index included, unless `spec` turns it off).
async fn declare_framework(target: &Target, spec: &ConsumerSpec, side: Side) {
    let connection = rabbit_backoff::connect(target.first_node())
        .await
        .expect("connect");
    if side == Side::FrameworkDelayed {
        assert_eq!(
            (spec.effective_queue_type(), spec.retry),
            (QueueType::Quorum, RetryBackend::Delayed),
            "the framework-delayed side needs a quorum target (BENCH_TARGETS=single-quorum) on RabbitMQ 4.3"
        );
    }
    if matches!(
        side,
        Side::FrameworkScheduled | Side::FrameworkScheduledUnindexed
    ) {
        assert_eq!(
            (spec.effective_queue_type(), spec.retry),
            (QueueType::Quorum, RetryBackend::Scheduled),
            "the framework-scheduled sides need a quorum target (BENCH_TARGETS=single-quorum) on RabbitMQ 4.3"
        );
    }
    rabbit_backoff::topology::declare_topology(&*connection, &Topology::of(spec))
        .await
        .expect("declare");
    connection.close().await;
}

/// The article's topology under the names of [`Names::article`], declared
/// as a hand-written consumer's set-up declares it: durable direct
/// exchanges, durable queues, the article's arguments, no index. For the
/// `delayed` side, no retry tiers and 4.3's delayed retries on the work
/// queue.
async fn declare_article(target: &Target, spec: &ConsumerSpec, names: &Names, side: Side) {
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes()));
    let quorum = spec.effective_queue_type() == QueueType::Quorum;
    // On a quorum target every queue is a quorum queue, as the framework's.
    let queue_type = |arguments: &mut FieldTable| {
        if quorum {
            arguments.insert("x-queue-type".into(), text("quorum"));
        }
    };
    let connection = connect(target).await;
    let channel = connection.create_channel().await.expect("channel");
    for exchange in &names.exchanges {
        channel
            .exchange_declare(
                exchange.as_str().into(),
                lapin::ExchangeKind::Direct,
                ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("declare {exchange}: {e}"));
    }
    // The article's work queue dead-letters to its dead-letter exchange.
    let mut work = FieldTable::default();
    work.insert("x-dead-letter-exchange".into(), text(&names.dlx));
    work.insert("x-dead-letter-routing-key".into(), text(&names.dlq_key));
    queue_type(&mut work);
    if quorum {
        // The one argument the framework adds to a quorum work queue that a
        // careful user adds too: an explicit delivery limit, the same as the
        // framework's (20), so that a message redelivered forever (a handler
        // that kills the process) is dead-lettered on every version, not
        // only from 4.0, whose default it is. The retry queues keep the
        // article's arguments: no `x-dead-letter-strategy = at-least-once`
        // and `x-overflow = reject-publish`, which the framework adds to its
        // own and a user copying the article does not know to.
        work.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongInt(i32::try_from(spec.delivery_limit).expect("a delivery limit")),
        );
    }
    if side == Side::Delayed {
        assert_eq!(
            spec.effective_queue_type(),
            QueueType::Quorum,
            "the delayed side needs a quorum target (BENCH_TARGETS=single-quorum) on RabbitMQ 4.3"
        );
        let delay = i64::try_from(spec.delays.as_millis()[0]).expect("a delay in range");
        work.insert("x-delayed-retry-type".into(), text("failed"));
        work.insert("x-delayed-retry-min".into(), AMQPValue::LongLongInt(delay));
        work.insert("x-delayed-retry-max".into(), AMQPValue::LongLongInt(delay));
    }
    if side == Side::Amqp1Loop {
        assert!(
            quorum,
            "the amqp1-loop side needs a quorum target (BENCH_TARGETS=single-quorum) on RabbitMQ 4.3"
        );
        // The work queue a careful user of 4.3's held-back retries declares
        // (docs/amqp-1.0.md): dead letters the queue moves itself (a
        // delivery limit reached) are not dropped, nor is a publish
        // beyond its length. `x-delivery-limit` (above) is over the one
        // retry of the schedule: each `modified` retry counts as a failed
        // delivery.
        work.insert("x-dead-letter-strategy".into(), text("at-least-once"));
        work.insert("x-overflow".into(), text("reject-publish"));
    }
    let mut queues = vec![(names.work_queue.clone(), work)];
    for (ms, queue) in &names.retry_queues {
        // An expired retry returns through the work exchange.
        let mut retry = FieldTable::default();
        retry.insert(
            "x-message-ttl".into(),
            AMQPValue::LongInt(i32::try_from(*ms).expect("a delay in range")),
        );
        retry.insert("x-dead-letter-exchange".into(), text(&names.exchange));
        retry.insert("x-dead-letter-routing-key".into(), text(&names.routing_key));
        queue_type(&mut retry);
        queues.push((queue.clone(), retry));
    }
    let mut dead = FieldTable::default();
    queue_type(&mut dead);
    queues.push((names.dlq.clone(), dead));
    for (queue, arguments) in queues {
        channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                arguments,
            )
            .await
            .unwrap_or_else(|e| panic!("declare {queue}: {e}"));
    }
    let mut bindings = vec![(&names.work_queue, &names.exchange, &names.routing_key)];
    bindings.extend(
        names
            .retry_queues
            .iter()
            .map(|(_, queue)| (queue, &names.retry_exchange, queue)),
    );
    bindings.push((&names.dlq, &names.dlx, &names.dlq_key));
    for (queue, exchange, key) in bindings {
        channel
            .queue_bind(
                queue.as_str().into(),
                exchange.as_str().into(),
                key.as_str().into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("bind {queue} to {exchange}: {e}"));
    }
    closed(channel.close(200, "".into())).await;
    closed(connection.close(200, "".into())).await;
}

/// Reads up to 20 of the run's dead letters (`basic.get` without an ack:
/// the queue is deleted next) and checks that each carries the article's
/// three headers, which a tool reading the dead letters of either side
/// relies on: what is wrong with the first that does not, if one does not.
async fn check_dead_letters(connection: &Connection, names: &Names) -> Option<String> {
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

async fn run_once(
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

/// What one side did with a run's messages.
struct Run {
    /// Seconds from the first delivery to the last message settled.
    elapsed: f64,
    /// The consumer's CPU seconds over that span (from the consumer's start).
    cpu: f64,
    /// Messages neither handled nor dead-lettered, or handled when they
    /// should have been dead-lettered.
    lost: usize,
    /// Handler runs past the first for one message.
    duplicates: usize,
    /// Messages in the dead-letter queue at the end.
    dead: usize,
}

/// Runs `side` over the run's messages in this process until every one is
/// handled or dead-lettered, and checks them.
async fn consume(
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

/// Whether each side runs in a process of its own (the default;
/// `BENCH_PROCESSES=0` runs them in this one, for profilers).
fn processes() -> bool {
    env_or("BENCH_PROCESSES", 1) == 1
}

/// The variable that makes this binary a child that runs one side:
/// `side|target|queue|prefetch|n|scenario`.
const CHILD: &str = "BENCH_CHILD";

/// What marks the child's report among the lines of its standard output,
/// where a framework side's log goes too.
const REPORT: &str = "bench-run:";

/// How many of a child's log lines are echoed to standard error, with the
/// count of the others: the framework logs a warning per dead letter.
const ECHOED: usize = 3;

/// The filter of a framework side's log (`BENCH_LOG`, default `warn`);
/// `None` for `off`: no subscriber.
fn log_filter() -> Option<String> {
    match std::env::var("BENCH_LOG") {
        Ok(filter) if filter.trim() == "off" => None,
        Ok(filter) if !filter.trim().is_empty() => Some(filter.trim().to_owned()),
        _ => Some("warn".to_owned()),
    }
}

/// In a framework side's child: a service's log, a `fmt` subscriber with
/// the `BENCH_LOG` filter writing a line per event to standard output,
/// which the parent reads through a pipe, as a container's runtime reads a
/// service's.
fn install_log() {
    let Some(filter) = log_filter() else { return };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|e| panic!("BENCH_LOG={filter:?}: {e}"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout)
        .with_ansi(false)
        .init();
}

/// [`consume`] in a child process of this binary, on a multi-thread tokio
/// runtime as `#[tokio::main]` builds it: its CPU is its own, read from the
/// OS (`getrusage`) over the same span. Its log lines are echoed (the
/// first [`ECHOED`]) before anything else; `Err` when it did not run, failed
/// or printed no report.
async fn in_child(
    target: &Target,
    side: Side,
    scenario: Scenario,
    n: usize,
    spec: &ConsumerSpec,
) -> Result<Run, String> {
    let job = format!(
        "{}|{}|{}|{}|{n}|{}",
        side.name(),
        target.name,
        spec.queue,
        spec.prefetch,
        scenario.name
    );
    let output = child::run(CHILD, job)
        .await
        .map_err(|e| format!("the child does not run: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (reports, log): (Vec<&str>, Vec<&str>) =
        stdout.lines().partition(|line| line.starts_with(REPORT));
    for line in log.iter().take(ECHOED) {
        eprintln!("  [{} {} log] {line}", scenario.name, side.name());
    }
    if log.len() > ECHOED {
        eprintln!(
            "  [{} {} log] … {} more lines ({} in all)",
            scenario.name,
            side.name(),
            log.len() - ECHOED,
            log.len()
        );
    }
    if !output.status.success() {
        return Err(format!("the child failed: {}", output.status));
    }
    let line = reports
        .last()
        .ok_or("the child printed no report")?
        .trim_start_matches(REPORT);
    let fields: Vec<f64> = line
        .split_whitespace()
        .map(|f| {
            f.parse()
                .map_err(|_| format!("the child's report: {line:?}"))
        })
        .collect::<Result<_, _>>()?;
    let [elapsed, cpu, lost, duplicates, dead] = fields[..] else {
        return Err(format!("the child's report: {line:?}"));
    };
    Ok(Run {
        elapsed,
        cpu,
        lost: lost as usize,
        duplicates: duplicates as usize,
        dead: dead as usize,
    })
}

/// The child's side of [`in_child`]: runs the side it was given and prints
/// its [`Run`] as one line marked [`REPORT`]; a framework side logs to the
/// same standard output ([`install_log`]).
fn child(job: &str) {
    let parts: Vec<&str> = job.split('|').collect();
    let [side, target, queue, prefetch, n, scenario] = parts[..] else {
        panic!("{CHILD}: {job:?}")
    };
    let side = Side::ALL
        .into_iter()
        .find(|s| s.name() == side)
        .expect("a side");
    let target = Target::named(target).expect("a target");
    let scenario = SCENARIOS
        .into_iter()
        .find(|s| s.name == scenario)
        .expect("a scenario");
    let n: usize = n.parse().expect("a count");
    let mut spec = framework
        .spec()
        .with_prefetch(prefetch.parse().expect("a prefetch"));
    spec.queue = queue.to_owned();
    spec.queue_type = Some(target.queue_type);
    side.configure(&mut spec);
    if side.is_framework() {
        install_log();
    }
    let runtime = tokio::runtime::Runtime::new().expect("tokio");
    let run = runtime.block_on(consume(&target, side, scenario, n, &spec));
    println!(
        "{REPORT} {} {} {} {} {}",
        run.elapsed, run.cpu, run.lost, run.duplicates, run.dead
    );
}

/// The broker process that listens on the port of `target`'s first node.
fn broker_pid(target: &Target) -> Option<u32> {
    broker_process::listening_on(target.first_node())
}

/// Deletes the inbox rows of a run's consumer, and vacuums the table, so
/// that each run starts from the table a server with autovacuum (the
/// default) would have: without it, every run's dead rows stay in the heap
/// and the indexes, and each run is slower than the one before.
async fn forget_keys(consumer: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&postgres_url())
        .await
        .expect("PostgreSQL");
    sqlx::query("DELETE FROM rabbit_backoff_inbox WHERE consumer = $1")
        .bind(consumer)
        .execute(&mut conn)
        .await
        .expect("delete the run's keys");
    sqlx::query("VACUUM ANALYZE rabbit_backoff_inbox")
        .execute(&mut conn)
        .await
        .expect("vacuum the inbox");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    (median(v.to_vec()), min, max)
}

async fn memory_check(target: &Target, prefetch: u16) {
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
    println!(
        "\nmemory (framework, S4): RSS {rss_at_20k} KiB after 20k messages, {rss_at_200k} KiB after 200k ({:+.1}%)",
        (rss_at_200k as f64 / rss_at_20k as f64 - 1.0) * 100.0
    );
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One target's table: every scenario, every side.
/// One line of a table: a scenario's median throughput and CPU per message
/// on one side.
struct Row {
    scenario: &'static str,
    side: Side,
    rate: f64,
    cpu_us: f64,
}

/// The median of what was measured, when anything was.
fn median_of(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| median(v.to_vec()))
}

/// One target's table at one prefetch: every scenario, every side.
async fn table(
    target: &Target,
    sides: &[Side],
    n: usize,
    n_s1: usize,
    reps: usize,
    prefetch: u16,
    only: &str,
) -> Vec<Row> {
    let mut rows = Vec::new();
    println!(
        "\n{} ({} queues at {}), prefetch {prefetch}",
        target.name,
        target.queue_type.as_str(),
        target
            .url
            .split(',')
            .map(|u| u.rsplit('@').next().unwrap_or(u).trim_end_matches("/%2f"))
            .collect::<Vec<_>>()
            .join(",")
    );
    println!(
        "{:<4} {:<29} {:>10} {:>10} {:>10} {:>11} {:>11} {:>6}   framework/baseline: throughput, CPU, broker CPU",
        "", "side", "msg/s med", "min", "max", "CPU µs/msg", "broker µs", "dups"
    );
    for scenario in SCENARIOS {
        if !only.is_empty() && !only.split(',').any(|o| o == scenario.name) {
            continue;
        }
        // S1 and S4, where most messages succeed, last long enough to read.
        let n = if matches!(scenario.name, "S1" | "S4") {
            n_s1
        } else {
            n
        };
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
        let summary: Vec<((f64, f64, f64), f64)> = samples
            .iter()
            .map(|(rates, cpus, _)| {
                if rates.is_empty() {
                    ((0.0, 0.0, 0.0), 0.0)
                } else {
                    (stats(rates), median(cpus.clone()))
                }
            })
            .collect();
        let framework_at = sides.iter().position(|s| *s == Side::Framework);
        let scheduled_at = sides.iter().position(|s| *s == Side::FrameworkScheduled);
        let delayed_at = sides.iter().position(|s| *s == Side::FrameworkDelayed);
        let amqp1_loop_at = sides.iter().position(|s| *s == Side::Amqp1Loop);
        // Side `a` to side `b`: throughput, CPU per message, the broker's.
        let to = |a: usize, b: usize| {
            format!(
                "{:.2}x, {:.2}x{}",
                summary[a].0.0 / summary[b].0.0,
                summary[a].1 / summary[b].1,
                match (median_of(&brokers[a]), median_of(&brokers[b])) {
                    (Some(a), Some(b)) => format!(", {:.2}x", a / b),
                    _ => String::new(),
                }
            )
        };
        for (i, side) in sides.iter().enumerate() {
            if !side.runs(scenario) {
                continue;
            }
            let (rate, cpu) = summary[i];
            let broker = median_of(&brokers[i]);
            let broker_ratio = |f: usize| match (median_of(&brokers[f]), broker) {
                (Some(ours), Some(theirs)) => format!(", {:.2}x", ours / theirs),
                _ => String::new(),
            };
            // Side `i` to each of `others` that ran, by name.
            let to_each = |others: [(Option<usize>, &str); 2]| {
                others
                    .into_iter()
                    .filter_map(|(at, name)| at.map(|j| format!("{} of {name}", to(i, j))))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let mut ratio = match framework_at {
                // Without its index: to the scheduled framework with it,
                // and to the hand-written loop, which writes no index.
                _ if *side == Side::FrameworkScheduledUnindexed => to_each([
                    (scheduled_at, "framework-scheduled"),
                    (amqp1_loop_at, "amqp1-loop"),
                ]),
                // `retry = "scheduled"`: to the framework with tiers, and
                // with `retry = "delayed"`.
                _ if *side == Side::FrameworkScheduled => to_each([
                    (framework_at, "the framework with retry tiers"),
                    (delayed_at, "framework-delayed"),
                ]),
                Some(f) if side.dedupe() => format!(
                    "{:.2}x, {:.2}x of the framework without dedupe",
                    rate.0 / summary[f].0.0,
                    cpu / summary[f].1
                ),
                // A variant of the framework: its own ratios to the framework.
                Some(f) if matches!(side, Side::FrameworkDelayed | Side::FrameworkUnindexed) => {
                    format!(
                        "{:.2}x, {:.2}x{} of the framework {}",
                        rate.0 / summary[f].0.0,
                        cpu / summary[f].1,
                        match (median_of(&brokers[f]), broker) {
                            (Some(theirs), Some(variant)) => {
                                format!(", {:.2}x", variant / theirs)
                            }
                            _ => String::new(),
                        },
                        if *side == Side::FrameworkDelayed {
                            "with retry tiers"
                        } else {
                            "with its index"
                        }
                    )
                }
                Some(f) if *side != Side::Framework => {
                    format!(
                        "{:.2}x, {:.2}x{}",
                        summary[f].0.0 / rate.0,
                        summary[f].1 / cpu,
                        broker_ratio(f)
                    )
                }
                _ => String::new(),
            };
            // Beside each baseline, the scheduled framework's ratios to it.
            if let Some(sched) = scheduled_at
                && !side.is_framework()
            {
                if !ratio.is_empty() {
                    ratio.push_str("; ");
                }
                ratio.push_str(&format!("scheduled {}", to(sched, i)));
            }
            println!(
                "{:<4} {:<29} {:>10.0} {:>10.0} {:>10.0} {:>11.1} {:>11} {:>6}   {}",
                scenario.name,
                side.name(),
                rate.0,
                rate.1,
                rate.2,
                cpu,
                broker.map_or("-".to_owned(), |b| format!("{b:.1}")),
                samples[i].2,
                ratio
            );
            rows.push(Row {
                scenario: scenario.name,
                side: *side,
                rate: rate.0,
                cpu_us: cpu,
            });
        }
        println!("     ({})", scenario.what);
    }
    rows
}

/// Throughput and CPU per message against the prefetch, scenario by
/// scenario and side by side, from the tables measured.
fn curve(measured: &[(u16, Vec<Row>)], sides: &[Side]) {
    println!("\nprefetch curve (median msg/s, CPU µs/msg):");
    let scenarios: Vec<&str> = SCENARIOS
        .iter()
        .map(|s| s.name)
        .filter(|name| {
            measured
                .iter()
                .any(|(_, rows)| rows.iter().any(|r| r.scenario == *name))
        })
        .collect();
    for scenario in scenarios {
        for side in sides {
            print!("{scenario:<4} {:<10}", side.name());
            for (prefetch, rows) in measured {
                if let Some(row) = rows
                    .iter()
                    .find(|r| r.scenario == scenario && r.side == *side)
                {
                    print!("  p{prefetch}: {:>6.0} {:>5.1}", row.rate, row.cpu_us);
                }
            }
            println!();
        }
    }
}

fn main() {
    if let Ok(job) = std::env::var(CHILD) {
        child(&job);
        return;
    }
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { env_or("BENCH_N", 10_000) } else { 300 };
    let reps = if full { env_or("BENCH_REPS", 3) } else { 1 };
    // S1 and S4 last long enough to read: at least 100 000 messages.
    let n_s1 = if full {
        env_or("BENCH_N_S1", n.max(100_000))
    } else {
        n
    };
    // The framework's default prefetch unless told: one value, or a list
    // for a curve.
    let default_prefetch = ConsumerSpec::new("bench", "1ms".parse().expect("a delay")).prefetch;
    let prefetches: Vec<u16> = env_or("BENCH_PREFETCH", default_prefetch.to_string())
        .split(',')
        .map(|p| {
            p.trim()
                .parse()
                .expect("BENCH_PREFETCH: numbers, comma-separated")
        })
        .collect();
    let prefetch = prefetches[0];
    let only: String = env_or("BENCH_SCENARIOS", String::new());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let sides: Vec<Side> = match std::env::var("BENCH_SIDES") {
        Ok(list) if !list.is_empty() => Side::ALL
            .into_iter()
            .filter(|side| list.split(',').any(|s| s.trim() == side.name()))
            .collect(),
        _ => Side::DEFAULT.to_vec(),
    };
    assert!(
        !sides.is_empty(),
        "BENCH_SIDES names none of {}",
        Side::ALL.map(Side::name).join(", ")
    );
    let targets: Vec<Target> = env_or("BENCH_TARGETS", String::from("single-classic"))
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            Target::named(t).unwrap_or_else(|| {
                panic!(
                    "BENCH_TARGETS: unknown target `{t}`; one of {}",
                    Target::NAMES.join(", ")
                )
            })
        })
        .collect();
    assert!(!targets.is_empty(), "BENCH_TARGETS names no target");
    rt.block_on(async {
        let names: Vec<&str> = sides.iter().map(|s| s.name()).collect();
        println!(
            "{n} messages a run (S1 and S4: {n_s1}), {reps} runs a side, prefetch = concurrency = {}, sides {} alternating, {}",
            prefetches
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            names.join(", "),
            if processes() {
                "each in a process of its own"
            } else {
                "in this process"
            }
        );
        if sides.iter().any(|side| side.is_framework()) {
            match (processes(), log_filter()) {
                (true, Some(filter)) => println!(
                    "framework log: filter {filter:?} (BENCH_LOG), a line per event on each framework child's standard output, a pipe this process reads"
                ),
                (true, None) => println!("framework log: off (BENCH_LOG=off): no subscriber"),
                (false, _) => println!("framework log: none (BENCH_PROCESSES=0: no subscriber in this process)"),
            }
        }
        for target in &targets {
            let sides = sides_on(target, &sides).await;
            if sides.is_empty() {
                continue;
            }
            let mut measured = Vec::new();
            for &prefetch in &prefetches {
                measured.push((prefetch, table(target, &sides, n, n_s1, reps, prefetch, &only).await));
            }
            if prefetches.len() > 1 {
                curve(&measured, &sides);
            }
        }

        // The rest on the default target only.
        let Some(default) = targets.iter().find(|t| t.name == "single-classic") else {
            return;
        };
        if !only.is_empty() || sides.len() < Side::DEFAULT.len() {
            return;
        }
        println!("\nS2 (republish to the dead-letter queue), framework, prefetch 1 vs 50:");
        for p in [1u16, 50] {
            let s = run_once(default, Side::Framework, SCENARIOS[1], n.min(3_000), p).await;
            println!("  prefetch {p:>2}: {:>8.0} msg/s, {:.1} µs CPU/msg", s.rate, s.cpu_us);
        }

        if full && env_or("BENCH_MEMORY", 1) == 1 {
            memory_check(default, prefetch).await;
        }
    });
}
