//! What a service gets from the published crates: the README's consumer on
//! RabbitMQ, the README's in-memory test, a hand-written `Classify`, and a
//! consumer that survives deeply nested headers with the lapin users get (no
//! patch, no `RUST_MIN_STACK`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use package_check::{Db, ForeignError, Order, process_order};
use rabbit_backoff::lapin::BasicProperties;
use rabbit_backoff::lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use rabbit_backoff::lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff::prelude::*;
use rabbit_backoff::testing::TestBroker;
use rabbit_backoff::amqp_url_from_env;
use rabbit_backoff::dead_letters::Dlq;
use rabbit_backoff::rules::Verdict;

const WAIT: Duration = Duration::from_secs(60);

fn unique(name: &str) -> String {
    format!("pkg-{name}-{}", uuid::Uuid::new_v4().simple())
}

/// Deletes what the spec's topology declared, the dead-letter index's
/// streams included.
async fn delete_topology(spec: &ConsumerSpec) {
    let connection = rabbit_backoff::lapin::Connection::connect(
        &amqp_url_from_env(),
        rabbit_backoff::lapin::ConnectionProperties::default(),
    )
    .await
    .expect("connects to clean up");
    let channel = connection.create_channel().await.expect("a channel");
    let names = spec.names();
    let dlq = &names.dead_letter_queue;
    let mut queues = vec![
        names.queue.clone(),
        dlq.clone(),
        format!("{dlq}.index"),
        format!("{dlq}.index.removed"),
    ];
    queues.extend(spec.retry_delays().iter().map(|&ms| names.retry_queue(ms)));
    for queue in queues {
        let _ = channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    for exchange in [
        &names.exchange,
        &names.retry_exchange,
        &names.dead_letter_exchange,
    ] {
        let _ = channel
            .exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
            .await;
    }
    let _ = connection.close(200, "done".into()).await;
}

async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done().await {
        assert!(Instant::now() < deadline, "{what} within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn dead_letters(spec: &ConsumerSpec) -> usize {
    let dlq = Dlq::connect(&amqp_url_from_env(), spec)
        .await
        .expect("the DLQ");
    let count = dlq
        .peek(&Default::default())
        .await
        .expect("a peek")
        .matched
        .len();
    dlq.close().await;
    count
}

/// The README's consumer started on RabbitMQ, on a queue of its own named
/// after `name`, with one tier of 1 s: its database, the running runtime
/// and its spec.
async fn start_on_rabbitmq(
    name: &str,
) -> (Arc<Db>, rabbit_backoff::RunningRuntime, ConsumerSpec) {
    let queue = unique(name);
    let db = Arc::new(Db::default());
    let running = Runtime::builder()
        .uri(amqp_url_from_env())
        .state_arc(db.clone())
        .handle_signals(false)
        .consumer_with(process_order, |spec| {
            spec.queue = queue.clone();
            spec.delays = "1s".parse().expect("delays");
        })
        .start()
        .await
        .expect("starts on RabbitMQ");
    let mut spec = process_order.spec();
    spec.queue = queue.clone();
    spec.delays = "1s".parse().expect("delays");
    (db, running, spec)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_consumer_handles_and_dead_letters_on_rabbitmq() {
    let (db, running, spec) = start_on_rabbitmq("service").await;

    let publisher = rabbit_backoff::Publisher::connect(&amqp_url_from_env())
        .await
        .expect("a publisher");
    for id in [1u64, 2, 0] {
        publisher
            .publish_to(&spec, &Order { id })
            .await
            .expect("published");
    }
    eventually("orders 1 and 2 stored", async || {
        db.stored.lock().unwrap().len() == 2
    })
    .await;
    eventually("the invalid order dead-lettered", async || {
        dead_letters(&spec).await == 1
    })
    .await;
    assert_eq!(*db.stored.lock().unwrap(), vec![1, 2]);
    publisher.close().await;
    running.stop().await.expect("stops");
    delete_topology(&spec).await;
}

#[tokio::test(start_paused = true)]
async fn the_readme_in_memory_test_plays_every_tier() {
    #[derive(Debug, thiserror::Error, Classify)]
    enum FlakyError {
        #[error("always down")]
        Down,
    }
    #[backoff_consumer(queue = "orders", delays = "5s,15s,60s")]
    async fn always_failing(_order: Order) -> Result<(), FlakyError> {
        Err(FlakyError::Down)
    }

    let broker = TestBroker::new();
    let running = Runtime::builder()
        .transport(broker.clone())
        .handle_signals(false)
        .consumer(always_failing)
        .start()
        .await
        .unwrap();
    broker
        .publish_json("orders", "orders", &Order { id: 7 })
        .await;
    broker.run_until_idle().await;
    let dead = broker.dead_letters("orders.dlq");
    assert_eq!(dead[0].retry_count(), 3);
    assert_eq!(
        dead[0].header_str("x-dead-letter-reason").as_deref(),
        Some("exhausted")
    );
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_hand_written_verdict_is_obeyed() {
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    #[backoff_consumer(queue = "foreign", delays = "1s,1m")]
    async fn foreign(order: Order) -> Result<(), ForeignError> {
        CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Err(match order.id {
            1 => ForeignError::Obsolete,
            2 => ForeignError::RateLimited(Duration::from_secs(30)),
            _ => ForeignError::Other,
        })
    }
    assert_eq!(ForeignError::Obsolete.verdict(), Verdict::Discard);

    let broker = TestBroker::new();
    let running = Runtime::builder()
        .transport(broker.clone())
        .handle_signals(false)
        .consumer(foreign)
        .start()
        .await
        .unwrap();
    broker
        .publish_json("foreign", "foreign", &Order { id: 1 })
        .await;
    broker.run_until_idle().await;
    assert_eq!(
        CALLS.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "discarded after one call"
    );
    assert!(
        broker.dead_letters("foreign.dlq").is_empty(),
        "a discard is no dead letter"
    );

    // Rate limited for 30 s: the 1 m tier (the smallest that waits as long),
    // every time, until the ladder is used up.
    broker
        .publish_json("foreign", "foreign", &Order { id: 2 })
        .await;
    broker.run_until_idle().await;
    let dead = broker.dead_letters("foreign.dlq");
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].header_str("x-dead-letter-reason").as_deref(),
        Some("exhausted")
    );
    running.stop().await.unwrap();
}

/// The encoded value (type tag first) of a header nested `levels` deep:
/// tables `{"a": …}`, or arrays `[…]` when `arrays`, around `true`, built as
/// bytes: a value this deep could not even be dropped on a test's stack.
fn deep_value(levels: usize, arrays: bool) -> Vec<u8> {
    let mut value = vec![b't', 1];
    for _ in 1..levels {
        let mut outer = Vec::with_capacity(value.len() + 7);
        if arrays {
            outer.push(b'A');
            outer.extend_from_slice(&(value.len() as u32).to_be_bytes());
        } else {
            outer.push(b'F');
            outer.extend_from_slice(&(value.len() as u32 + 2).to_be_bytes());
            outer.extend_from_slice(&[1, b'a']);
        }
        outer.extend_from_slice(&value);
        value = outer;
    }
    value
}

/// Properties whose headers are `{"deep": value}`, given as the framework's
/// connection takes them: the flat header that stands for headers too deep
/// for lapin, which that connection writes out as the headers themselves.
fn deep_properties(id: u64, value: &[u8]) -> BasicProperties {
    let mut entries = vec![4];
    entries.extend_from_slice(b"deep");
    entries.extend_from_slice(value);
    let packed = rabbit_backoff::rules::deep_headers::pack(&entries).expect("well formed");
    let mut headers = FieldTable::default();
    headers.insert(
        rabbit_backoff::rules::headers::DEEP_HEADERS.into(),
        AMQPValue::ByteArray(packed.into()),
    );
    BasicProperties::default()
        .with_message_id(format!("deep-{id}").into())
        .with_delivery_mode(2)
        .with_headers(headers)
}

#[tokio::test(flavor = "multi_thread")]
async fn deeply_nested_headers_stop_neither_the_consumer_nor_a_peek() {
    use rabbit_backoff::transport::{Confirm, Connection as _, Publication};

    let (db, running, spec) = start_on_rabbitmq("deep").await;
    let names = spec.names();

    // Sent through the framework's own connection, which writes the deep
    // headers as they are on the wire: lapin never holds them as values.
    let framework = rabbit_backoff::transport::AmqpTransport::new(amqp_url_from_env())
        .connect_amqp()
        .await
        .expect("the framework connects");
    let publishing = framework.open_channel().await.expect("a channel");
    let shapes = [
        (1_000, false),
        (5_000, false),
        (18_000, false),
        (25_000, true),
    ];
    for (id, &(levels, arrays)) in (1u64..).zip(&shapes) {
        let body = serde_json::to_vec(&Order { id }).expect("json");
        let confirm = publishing
            .publish(Publication::new(
                &names.exchange,
                &names.routing_key,
                &body,
                deep_properties(id, &deep_value(levels, arrays)),
            ))
            .await
            .expect("the broker takes a deep message");
        assert_eq!(confirm, Confirm::Ack);
    }
    let publisher = rabbit_backoff::Publisher::connect(&amqp_url_from_env())
        .await
        .expect("a publisher");
    for id in 10..60u64 {
        publisher
            .publish_to(&spec, &Order { id })
            .await
            .expect("published");
    }
    publisher.close().await;

    eventually("the 50 orders behind the deep ones", async || {
        db.stored
            .lock()
            .unwrap()
            .iter()
            .filter(|id| **id >= 10)
            .count()
            == 50
    })
    .await;
    eventually("the 4 deep messages in the DLQ", async || {
        dead_letters(&spec).await == 4
    })
    .await;
    assert!(
        db.stored.lock().unwrap().iter().all(|id| *id >= 10),
        "the handler never saw a deep message"
    );
    let health = running.health();
    assert!(health.is_ready(), "still consuming: {:?}", health.current());
    assert_eq!(health.reconnects(), 0, "the connection was never lost");
    running.stop().await.expect("stops");
    delete_topology(&spec).await;
}

/// The README's service logs at `warn` with no `RUST_LOG`: an address
/// nothing answers at gives warnings; a healthy start on the broker gives
/// no ERROR and no WARN line (on RabbitMQ 4.3 too, where the framework used
/// to ask the broker with a declaration it refused, which lapin logs at
/// ERROR).
#[tokio::test]
async fn the_readme_service_logs_at_warn_and_a_healthy_start_logs_no_error() {
    let run = |url: String, queue: String| async move {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_package-check"))
            .env("AMQP_URL", url)
            .env("ORDERS_QUEUE", queue)
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the service starts");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let _ = child.start_kill();
        let output = child.wait_with_output().await.expect("its output");
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        without_colours(&text)
    };
    let nowhere = run("amqp://guest:guest@127.0.0.1:1/%2f".into(), unique("log")).await;
    assert!(nowhere.contains(" WARN "), "no warning logged: {nowhere:?}");
    assert!(!nowhere.contains(" INFO "), "logged below warn: {nowhere:?}");

    let queue = unique("log");
    let healthy = run(amqp_url_from_env(), queue.clone()).await;
    let mut spec = process_order.spec();
    spec.queue = queue;
    delete_topology(&spec).await;
    assert!(
        !healthy.contains("ERROR") && !healthy.contains(" WARN "),
        "a healthy start logged: {healthy}"
    );
}

/// `text` without the terminal's colour codes (`ESC [ … m`), which the
/// subscriber writes around each level.
fn without_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}
