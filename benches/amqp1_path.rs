//! What RabbitMQ spends on the two paths `retry = "scheduled"` rests on,
//! with no framework in the way: delivering a message over AMQP 1.0 against
//! AMQP 0-9-1, and a failed delivery held back with annotations against one
//! returned at once. Each side consumes `N` messages a quorum queue holds
//! (published beforehand over 0-9-1, as the framework's publishers do), in
//! a process of its own (this binary again, with `AMQP1_PATH_CHILD` set);
//! the broker's CPU is read from `/proc/<pid>/stat` of the process
//! listening on the node's port, before and after, once it is quiet.
//!
//! Sides, each as a careful user of its client writes it (`prefetch` `P`):
//! - `0-9-1`: lapin, `basic.qos(P)`, one `basic.ack` with `multiple` per
//!   `P/2` deliveries;
//! - `amqp1`: fe2o3-amqp, credit keeping at most `P` deliveries unsettled,
//!   granted in batches of `P/2`, `accepted` as one range per `P/2`;
//! - `amqp1-presettled`: the same link sent settled (`snd-settle-mode
//!   settled`): no disposition at all, credit only;
//! - `retry-at-once`, `retry-held`, `retry-annotated`: every message failed
//!   once, settled as `modified` with `delivery-failed`, then `accepted`
//!   when it comes back: with no annotation (back at once), with
//!   `x-opt-delivery-time` (now + 1 ms), and with it and the three
//!   annotations `retry = "scheduled"` sends on a retry (retry count,
//!   error, first failure).
//!
//! Both AMQP 1.0 clients open their socket with `TCP_NODELAY` and grant a
//! new link its credit only after the broker's first `flow`, as the
//! framework does ([RabbitMQ versions](../docs/rabbitmq-versions.md)).
//!
//! ```sh
//! scripts/broker.sh up 4.3 && eval "$(scripts/broker.sh env 4.3)"
//! AMQP1_PATH_N=20000 AMQP1_PATH_PREFETCH=50 AMQP1_PATH_REPS=2 cargo bench --bench amqp1_path
//! ```
//!
//! `AMQP1_PATH_SIDES` (comma-separated) chooses the sides. The figures are
//! ratios between sides of one run: the machine is noisy. Under `cargo
//! test` each side runs once on 300 messages (on RabbitMQ 3.x, per
//! `RABBITMQ_VERSION`, only `0-9-1`).

#[path = "common/broker_process.rs"]
mod broker_process;
#[path = "common/child.rs"]
mod child;

use std::time::{Duration, Instant};

use fe2o3_amqp::link::Receiver;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::definitions::SenderSettleMode;
use fe2o3_amqp::types::messaging::annotations::AnnotationKey;
use fe2o3_amqp::types::messaging::{Body, Modified};
use fe2o3_amqp::types::primitives::{OrderedMap, Symbol, Timestamp, Value};
use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicQosOptions};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use rabbit_backoff_core::annotations;
use rabbit_backoff_test_support::declare;

/// The variable that makes this binary a child running one side:
/// `side|queue|prefetch|n`.
const CHILD: &str = "AMQP1_PATH_CHILD";
/// What marks a child's report on its standard output.
const REPORT: &str = "amqp1-path:";

/// One side of the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Amqp091,
    Amqp1,
    Amqp1Presettled,
    RetryAtOnce,
    RetryHeld,
    RetryAnnotated,
}

impl Side {
    const ALL: [Side; 6] = [
        Side::Amqp091,
        Side::Amqp1,
        Side::Amqp1Presettled,
        Side::RetryAtOnce,
        Side::RetryHeld,
        Side::RetryAnnotated,
    ];

    fn name(self) -> &'static str {
        match self {
            Side::Amqp091 => "0-9-1",
            Side::Amqp1 => "amqp1",
            Side::Amqp1Presettled => "amqp1-presettled",
            Side::RetryAtOnce => "retry-at-once",
            Side::RetryHeld => "retry-held",
            Side::RetryAnnotated => "retry-annotated",
        }
    }

    fn named(name: &str) -> Side {
        Side::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .unwrap_or_else(|| panic!("no side {name:?}: one of 0-9-1, amqp1, amqp1-presettled, retry-at-once, retry-held, retry-annotated"))
    }

    /// The annotations of the `modified` that fails a delivery; `None` for
    /// the sides that fail none.
    fn failure(self) -> Option<Vec<&'static str>> {
        match self {
            Side::RetryAtOnce => Some(vec![]),
            Side::RetryHeld => Some(vec![annotations::DELIVERY_TIME]),
            Side::RetryAnnotated => Some(vec![
                annotations::DELIVERY_TIME,
                annotations::RETRY_COUNT,
                annotations::ERROR,
                annotations::FIRST_FAILED_AT,
            ]),
            _ => None,
        }
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not understood"))
        })
        .unwrap_or(default)
}

fn amqp_url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// What one side measured in its process.
struct Measured {
    rate: f64,
    consumer_us: f64,
    broker_us: f64,
}

#[tokio::main]
async fn main() {
    if let Ok(job) = std::env::var(CHILD) {
        child(&job).await;
        return;
    }
    // Under `cargo test`: each side once, on a few messages, to show that
    // it runs and settles everything.
    let full = std::env::args().any(|a| a == "--bench");
    let n: u32 = if full {
        env_or("AMQP1_PATH_N", 20_000)
    } else {
        300
    };
    let prefetch: u32 = env_or("AMQP1_PATH_PREFETCH", 50);
    let reps: usize = if full {
        env_or("AMQP1_PATH_REPS", 2)
    } else {
        1
    };
    let mut sides: Vec<Side> = std::env::var("AMQP1_PATH_SIDES")
        .map(|s| s.split(',').map(|s| Side::named(s.trim())).collect())
        .unwrap_or_else(|_| Side::ALL.to_vec());
    // RabbitMQ 3.x speaks AMQP 1.0 only through a plugin, and holds no
    // retry back: there, the test run measures the 0-9-1 side alone.
    let version = std::env::var("RABBITMQ_VERSION").unwrap_or_default();
    if version.starts_with("3.") {
        assert!(
            !full,
            "RABBITMQ_VERSION={version}: this bench needs RabbitMQ 4.3 (scripts/broker.sh up 4.3)"
        );
        eprintln!("RabbitMQ {version}: the 0-9-1 side alone");
        sides.retain(|&s| s == Side::Amqp091);
    }
    let url = amqp_url();
    let broker = broker_process::listening_on(&url);
    if broker.is_none() {
        eprintln!("the broker's process is not on this machine: no broker CPU");
    }
    let admin = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| panic!("the broker at {url}: {e}"));
    let mut results: Vec<(Side, Vec<Measured>)> = sides.iter().map(|&s| (s, vec![])).collect();
    for _ in 0..reps {
        for (side, measured) in &mut results {
            let queue = format!("bench.amqp1-path.{}", uuid::Uuid::new_v4().simple());
            fill(&admin, &queue, n).await;
            if full {
                broker_process::quiet(broker).await;
            }
            let before = broker.and_then(broker_process::cpu_seconds_of);
            let (rate, consumer_us) = in_child(*side, &queue, prefetch, n).await;
            let broker_us = broker
                .and_then(broker_process::cpu_seconds_of)
                .zip(before)
                .map_or(f64::NAN, |(after, before)| {
                    (after - before) * 1e6 / f64::from(n)
                });
            let channel = admin.create_channel().await.expect("a channel");
            let left = channel
                .queue_delete(queue.as_str().into(), Default::default())
                .await
                .expect("the queue is deleted");
            assert_eq!(left, 0, "{}: every message settled", side.name());
            let _ = channel.close(200, "".into()).await;
            measured.push(Measured {
                rate,
                consumer_us,
                broker_us,
            });
        }
    }
    let _ = admin.close(200, "".into()).await;
    println!(
        "AMQP 1.0 and 0-9-1 on a quorum queue: {n} messages a run, prefetch {prefetch}, {reps} run(s) a side; medians"
    );
    println!(
        "{:<18} {:>10} {:>16} {:>14}",
        "side", "msg/s", "consumer µs/msg", "broker µs/msg"
    );
    for (side, measured) in &results {
        let median = |f: fn(&Measured) -> f64| {
            let mut v: Vec<f64> = measured.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "{:<18} {:>10.0} {:>16.1} {:>14.1}   (runs: {})",
            side.name(),
            median(|m| m.rate),
            median(|m| m.consumer_us),
            median(|m| m.broker_us),
            measured
                .iter()
                .map(|m| format!("{:.0}", m.rate))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

/// A quorum queue holding `n` messages, published over 0-9-1 with confirms.
async fn fill(admin: &Connection, queue: &str, n: u32) {
    let channel = admin.create_channel().await.expect("a channel");
    channel
        .confirm_select(Default::default())
        .await
        .expect("confirms");
    declare::queue(
        &channel,
        queue,
        declare::arguments(&[("x-queue-type", declare::text("quorum"))]),
    )
    .await;
    let mut pending = Vec::new();
    for id in 0..n {
        let body = format!("{{\"id\":{id},\"fail\":\"none\",\"attempts\":0}}");
        pending.push(
            channel
                .basic_publish(
                    "".into(),
                    queue.into(),
                    Default::default(),
                    body.as_bytes(),
                    BasicProperties::default().with_delivery_mode(2),
                )
                .await
                .expect("published"),
        );
        if pending.len() >= 500 {
            for confirm in pending.drain(..) {
                confirm.await.expect("confirmed");
            }
        }
    }
    for confirm in pending {
        confirm.await.expect("confirmed");
    }
    let _ = channel.close(200, "".into()).await;
}

/// Runs `side` in a child process; its rate and CPU per message.
async fn in_child(side: Side, queue: &str, prefetch: u32, n: u32) -> (f64, f64) {
    let job = format!("{}|{queue}|{prefetch}|{n}", side.name());
    let output = child::run(CHILD, job).await.expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = stdout
        .lines()
        .find_map(|line| line.strip_prefix(REPORT))
        .unwrap_or_else(|| {
            panic!(
                "{}: the child printed no report ({})",
                side.name(),
                output.status
            )
        });
    let mut fields = report
        .split_whitespace()
        .map(|f| f.parse::<f64>().expect("a figure"));
    (
        fields.next().expect("the rate"),
        fields.next().expect("the CPU"),
    )
}

/// The child: consumes `n` messages as `side`, and prints its rate and CPU
/// per message over that span.
async fn child(job: &str) {
    let fields: Vec<&str> = job.split('|').collect();
    let [side, queue, prefetch, n] = fields[..] else {
        panic!("{CHILD}={job:?}")
    };
    let side = Side::named(side);
    let prefetch: u32 = prefetch.parse().expect("the prefetch");
    let n: u32 = n.parse().expect("the count");
    let url = amqp_url();
    let consumed = async {
        match side {
            Side::Amqp091 => amqp091(&url, queue, prefetch, n).await,
            _ => amqp1(&url, side, queue, prefetch, n).await,
        }
    };
    // A message the broker never delivers again would hang the run.
    let (started, cpu_before) = tokio::time::timeout(Duration::from_secs(300), consumed)
        .await
        .unwrap_or_else(|_| panic!("{}: {n} messages not settled within 300 s", side.name()));
    let secs = started.elapsed().as_secs_f64();
    let cpu = own_cpu_seconds() - cpu_before;
    println!(
        "{REPORT} {} {}",
        f64::from(n) / secs,
        cpu * 1e6 / f64::from(n)
    );
}

/// This process's user and system CPU seconds so far.
fn own_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given, which is zeroed.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// lapin, `basic.qos(prefetch)`, a multiple ack per half of it; when it
/// started consuming, and the CPU it had used by then.
async fn amqp091(url: &str, queue: &str, prefetch: u32, n: u32) -> (Instant, f64) {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("a 0-9-1 connection");
    let channel = connection.create_channel().await.expect("a channel");
    channel
        .basic_qos(
            u16::try_from(prefetch).expect("a 0-9-1 prefetch"),
            BasicQosOptions::default(),
        )
        .await
        .expect("qos");
    let started = (Instant::now(), own_cpu_seconds());
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "amqp1-path".into(),
            Default::default(),
            Default::default(),
        )
        .await
        .expect("a consumer");
    let batch = (prefetch / 2).max(1);
    for got in 1..=n {
        let delivery = consumer
            .next()
            .await
            .expect("a delivery")
            .expect("a delivery");
        if got % batch == 0 || got == n {
            delivery
                .acker
                .ack(BasicAckOptions { multiple: true })
                .await
                .expect("acked");
        }
    }
    let _ = channel.close(200, "".into()).await;
    let _ = connection.close(200, "".into()).await;
    started
}

/// fe2o3-amqp, as `side`; when it started consuming, and the CPU it had
/// used by then.
async fn amqp1(url: &str, side: Side, queue: &str, prefetch: u32, n: u32) -> (Instant, f64) {
    let mut connection = rabbit_backoff_test_support::amqp1::open(
        url,
        format!("amqp1-path-{}", uuid::Uuid::new_v4().simple()),
    )
    .await;
    let mut session = fe2o3_amqp::Session::begin(&mut connection)
        .await
        .expect("a session");
    let mut builder = Receiver::builder()
        .name("amqp1-path")
        .source(format!("/queues/{queue}"))
        .credit_mode(CreditMode::Manual);
    if side == Side::Amqp1Presettled {
        builder = builder.sender_settle_mode(SenderSettleMode::Settled);
    }
    let mut receiver = builder.attach(&mut session).await.expect("a receiver");
    receiver.set_credit(0).await.expect("no credit");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let started = (Instant::now(), own_cpu_seconds());
    receiver.set_credit(prefetch).await.expect("credit");
    let batch = (prefetch / 2).max(1);
    let failure = side.failure();
    let mut accepted = Vec::new();
    let mut done = 0;
    while done < n {
        let delivery = receiver.recv::<Body<Value>>().await.expect("a delivery");
        if side == Side::Amqp1Presettled {
            done += 1;
        } else {
            let (info, message) = delivery.into_parts();
            let back = message
                .message_annotations
                .as_ref()
                .and_then(|a| a.get(&"x-delivery-count" as &dyn AnnotationKey))
                .is_some();
            match &failure {
                Some(keys) if !back => {
                    receiver.modify(info, failed(keys)).await.expect("modified");
                }
                _ => {
                    accepted.push(info);
                    done += 1;
                    if accepted.len() as u32 >= batch || done == n {
                        receiver
                            .accept_all(std::mem::take(&mut accepted))
                            .await
                            .expect("accepted");
                    }
                }
            }
        }
        // Credit up to `prefetch` unsettled, in batches of half.
        let wanted = prefetch - accepted.len() as u32;
        if wanted > receiver.credit() && wanted - receiver.credit() >= batch {
            receiver.set_credit(wanted).await.expect("credit");
        }
    }
    let _ = receiver.close().await;
    let _ = session.end().await;
    let _ = connection.close().await;
    started
}

/// `modified` with `delivery-failed` and the annotations `keys`, as
/// `retry = "scheduled"` writes them.
fn failed(keys: &[&str]) -> Modified {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_millis() as i64;
    let mut fields = OrderedMap::new();
    for &key in keys {
        let value = match key {
            annotations::DELIVERY_TIME => Value::Timestamp(Timestamp::from_milliseconds(now + 1)),
            annotations::RETRY_COUNT => Value::Uint(1),
            annotations::ERROR => Value::String("transient failure".into()),
            _ => Value::String("2026-12-06T15:35:55.123Z".into()),
        };
        fields.insert(Symbol::from(key), value);
    }
    Modified {
        delivery_failed: Some(true),
        undeliverable_here: Some(false),
        message_annotations: (!fields.is_empty()).then_some(fields),
    }
}
