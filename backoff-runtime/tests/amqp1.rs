//! The AMQP 1.0 consume path (feature `amqp1`) against the broker
//! `AMQP_URL` names: messages published over AMQP 0-9-1 to a quorum queue,
//! consumed through the holding channels of the transport's `Connection`
//! (sessions of the AMQP 1.0 connection it pairs itself with), settled
//! with each outcome.
//!
//! On RabbitMQ 4.3 and later everything is asserted, the held-back
//! `modified` included; 4.0 to 4.2 the same but the hold-back (they
//! redeliver at once); before 4.0 (no AMQP 1.0 without its plugin) that
//! the connection is refused, saying why. Nothing is skipped silently.
//!
//! The tests of this file run one at a time: one of them closes the
//! broker side of its AMQP 1.0 connection.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel as LapinChannel};
use rabbit_backoff_runtime::transport::{
    AmqpTransport, AnnotationValue, Channel, Connection, Deliveries, Delivery, Modification,
    Transport, TransportError,
};
use rabbit_backoff_test_support::broker::{connect, unique, url};
use rabbit_backoff_test_support::cleanup::Cleanup;
use tokio::sync::Mutex;

/// One test at a time (see the module's documentation).
static SERIAL: Mutex<()> = Mutex::const_new(());

/// How long a test waits for a delivery that should come.
const PATIENCE: Duration = Duration::from_secs(15);
/// How late a held-back redelivery may come on a busy machine.
const LATE_BOUND: Duration = Duration::from_millis(1500);

// ---- the broker ----

/// The test broker's `rabbitmqctl`: the command in `RABBITMQCTL`, or the
/// installed one.
fn rabbitmqctl() -> std::process::Command {
    let line = std::env::var("RABBITMQCTL").unwrap_or_else(|_| "rabbitmqctl".to_owned());
    let mut words = line.split_whitespace();
    let mut command = std::process::Command::new(words.next().unwrap_or("rabbitmqctl"));
    command.args(words);
    command
}

fn rabbitmqctl_output(args: &[&str]) -> String {
    let output = rabbitmqctl().args(args).output().expect("rabbitmqctl runs");
    assert!(
        output.status.success(),
        "rabbitmqctl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A connection to `uri` and its first holding channel, a session of the
/// AMQP 1.0 connection it opens beside itself, as the runtime opens them.
async fn amqp1_connect(
    uri: &str,
) -> Result<(Arc<dyn Connection>, Arc<dyn Channel>), TransportError> {
    let connection = AmqpTransport::new(uri).connect().await?;
    match connection.open_holding_channel().await {
        Ok(channel) => Ok((connection, channel)),
        Err(e) => {
            connection.close().await;
            Err(e)
        }
    }
}

/// The broker's version as (major, minor).
fn broker_version() -> (u32, u32) {
    let status: serde_json::Value = serde_json::from_str(&rabbitmqctl_output(&[
        "-q",
        "status",
        "--formatter",
        "json",
    ]))
    .expect("rabbitmqctl status prints JSON");
    let version = status["rabbitmq_version"]
        .as_str()
        .expect("the status names the version");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The pids of the broker's AMQP 1.0 connections.
fn amqp1_connections() -> Vec<String> {
    rabbitmqctl_output(&["-q", "list_connections", "pid", "protocol"])
        .lines()
        .filter(|line| line.starts_with('<') && (line.contains("{1, 0}") || line.contains("{1,0}")))
        .filter_map(|line| line.split('\t').next().map(str::to_owned))
        .collect()
}

/// A connection through the transport with its first holding channel (over
/// AMQP 1.0), or `None` on a broker before 4.0, after asserting that it
/// refused AMQP 1.0, saying why.
async fn amqp1() -> Option<(Arc<dyn Connection>, Arc<dyn Channel>)> {
    let version = broker_version();
    let connection = amqp1_connect(&url()).await;
    if version < (4, 0) {
        let error = connection
            .err()
            .unwrap_or_else(|| panic!("RabbitMQ {version:?} accepted an AMQP 1.0 connection: is its AMQP 1.0 plugin enabled?"));
        assert!(
            matches!(&error, TransportError::Other(text) if text.contains("does not speak AMQP 1.0")),
            "RabbitMQ {version:?}: {error}"
        );
        eprintln!("RabbitMQ {version:?} refuses AMQP 1.0 as expected: {error}");
        return None;
    }
    Some(connection.unwrap_or_else(|e| panic!("RabbitMQ {version:?} refused AMQP 1.0: {e}")))
}

/// A quorum queue dead-lettering into `<queue>.dlq` through `<queue>.dlx`,
/// and a lapin channel in confirm mode to publish to it and read the DLQ.
struct Fixture {
    queue: String,
    dlq: String,
    lapin: lapin::Connection,
    channel: LapinChannel,
    _cleanup: Cleanup,
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.as_bytes()))
}

impl Fixture {
    async fn new(name: &str) -> Fixture {
        let queue = unique(name);
        let dlx = format!("{queue}.dlx");
        let dlq = format!("{queue}.dlq");
        let cleanup = Cleanup::default().queue(&queue).queue(&dlq).exchange(&dlx);
        let lapin = connect().await;
        let channel = lapin.create_channel().await.expect("a channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        let mut dlq_args = FieldTable::default();
        dlq_args.insert("x-queue-type".into(), text("quorum"));
        channel
            .queue_declare(dlq.as_str().into(), durable, dlq_args)
            .await
            .expect("declare the DLQ");
        channel
            .exchange_declare(
                dlx.as_str().into(),
                lapin::ExchangeKind::Fanout,
                ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("declare the DLX");
        channel
            .queue_bind(
                dlq.as_str().into(),
                dlx.as_str().into(),
                "".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind the DLQ");
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), text("quorum"));
        args.insert("x-dead-letter-exchange".into(), text(&dlx));
        args.insert("x-dead-letter-strategy".into(), text("at-least-once"));
        args.insert("x-overflow".into(), text("reject-publish"));
        channel
            .queue_declare(queue.as_str().into(), durable, args)
            .await
            .expect("declare the quorum queue");
        Fixture {
            queue,
            dlq,
            lapin,
            channel,
            _cleanup: cleanup,
        }
    }

    /// Publishes `body` over AMQP 0-9-1 with the message id `id`, a
    /// content type, a correlation id and two headers, and waits for the
    /// broker's confirm.
    async fn publish(&self, id: &str, body: &[u8]) {
        let mut headers = FieldTable::default();
        headers.insert("tenant".into(), text("eu"));
        headers.insert("attempt".into(), AMQPValue::LongInt(3));
        let properties = BasicProperties::default()
            .with_message_id(ShortString::from(id))
            .with_correlation_id(ShortString::from(format!("corr-{id}")))
            .with_content_type("application/json".into())
            .with_headers(headers);
        let confirm = self
            .channel
            .basic_publish(
                "".into(),
                self.queue.as_str().into(),
                BasicPublishOptions::default(),
                body,
                properties,
            )
            .await
            .expect("publish")
            .await
            .expect("a confirm");
        assert!(confirm.is_ack(), "{confirm:?}");
    }

    /// The ready messages of `queue`.
    async fn depth(&self, queue: &str) -> u32 {
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("passive declare")
            .message_count()
    }

    /// Waits until `queue` holds `n` ready messages.
    async fn wait_depth(&self, queue: &str, n: u32) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let depth = self.depth(queue).await;
            if depth == n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{queue} holds {depth} ready messages, not {n}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The next message of the dead-letter queue, over AMQP 0-9-1.
    async fn dead_letter(&self) -> lapin::message::BasicGetMessage {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let got = self
                .channel
                .basic_get(self.dlq.as_str().into(), BasicGetOptions { no_ack: true })
                .await
                .expect("basic.get on the DLQ");
            if let Some(message) = got {
                return message;
            }
            assert!(Instant::now() < deadline, "nothing was dead-lettered");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    async fn close(self) {
        let _ = self.lapin.close(200, "done".into()).await;
    }
}

async fn next(deliveries: &mut Deliveries) -> Delivery {
    tokio::time::timeout(PATIENCE, deliveries.stream.next())
        .await
        .expect("a delivery in time")
        .expect("the stream goes on")
        .expect("a delivery, not an error")
}

fn header<'a>(delivery: &'a Delivery, name: &str) -> Option<&'a AMQPValue> {
    delivery.properties.headers().as_ref()?.inner().get(name)
}

fn header_str(delivery: &Delivery, name: &str) -> Option<String> {
    match header(delivery, name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

fn header_int(delivery: &Delivery, name: &str) -> Option<i64> {
    Some(match header(delivery, name)? {
        AMQPValue::ShortShortInt(v) => (*v).into(),
        AMQPValue::ShortInt(v) => (*v).into(),
        AMQPValue::LongInt(v) => (*v).into(),
        AMQPValue::LongLongInt(v) => *v,
        AMQPValue::ShortShortUInt(v) => (*v).into(),
        AMQPValue::ShortUInt(v) => (*v).into(),
        AMQPValue::LongUInt(v) => (*v).into(),
        AMQPValue::Timestamp(v) => i64::try_from(*v).ok()?,
        _ => return None,
    })
}

fn id(delivery: &Delivery) -> String {
    delivery
        .properties
        .message_id()
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

// ---- the tests ----

#[tokio::test]
async fn properties_and_headers_arrive_and_ack_removes() {
    let _serial = SERIAL.lock().await;
    let Some((connection, channel)) = amqp1().await else {
        return;
    };
    let fixture = Fixture::new("amqp1-props").await;
    fixture.publish("m-1", br#"{"id":1}"#).await;

    channel.qos(10).await.expect("qos");
    let mut deliveries = channel.consume(&fixture.queue).await.expect("consume");
    assert!(
        deliveries
            .consumer_tag
            .starts_with("rabbit-backoff-consumer-")
    );
    let delivery = next(&mut deliveries).await;
    assert_eq!(delivery.data, br#"{"id":1}"#);
    assert_eq!(id(&delivery), "m-1");
    let p = &delivery.properties;
    assert_eq!(
        p.correlation_id().as_ref().map(|s| s.as_str()),
        Some("corr-m-1")
    );
    assert_eq!(
        p.content_type().as_ref().map(|s| s.as_str()),
        Some("application/json")
    );
    assert_eq!(header_str(&delivery, "tenant").as_deref(), Some("eu"));
    assert_eq!(header_int(&delivery, "attempt"), Some(3));
    assert_eq!(delivery.exchange, "");
    assert_eq!(delivery.routing_key, fixture.queue);
    assert!(!delivery.redelivered);
    assert_eq!(delivery.acker.delivery_tag(), 1);

    // What the AMQP 1.0 channel does not do, it refuses, saying so.
    let refused = channel.delete_queue(&fixture.queue).await.unwrap_err();
    assert!(refused.to_string().contains("only consumes"), "{refused}");
    let missing = channel.consume(&unique("amqp1-missing")).await.err();
    assert!(
        missing.as_ref().is_some_and(TransportError::is_not_found),
        "{missing:?}"
    );

    tokio::time::timeout(Duration::from_secs(5), delivery.acker.ack())
        .await
        .expect("ack answers")
        .expect("accepted");
    assert!(
        delivery.acker.ack().await.is_err(),
        "a delivery settles once"
    );
    channel.close().await;
    // Settled: not back in the queue once the link is gone.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fixture.depth(&fixture.queue).await, 0);
    connection.close().await;
    fixture.close().await;
}

#[tokio::test]
async fn requeue_and_fail_come_back_modified_holds_back_and_dead_letters() {
    let _serial = SERIAL.lock().await;
    let Some((connection, channel)) = amqp1().await else {
        return;
    };
    let holds_back = broker_version() >= (4, 3);
    let fixture = Fixture::new("amqp1-outcomes").await;
    fixture.publish("m-2", b"job").await;
    channel.qos(1).await.expect("qos");
    let mut deliveries = channel.consume(&fixture.queue).await.expect("consume");

    // released: back at once, not counted as a failure.
    let first = next(&mut deliveries).await;
    assert_eq!(header_int(&first, "x-delivery-count"), None);
    first.acker.requeue().await.expect("released");
    let again = next(&mut deliveries).await;
    assert_eq!(id(&again), "m-2");
    assert_eq!(again.acker.delivery_tag(), 2);
    assert!(again.redelivered, "released: no longer the first acquirer");
    assert_eq!(
        header_int(&again, "x-delivery-count"),
        None,
        "released is no failure"
    );

    // modified, delivery-failed: back, counted.
    again.acker.fail().await.expect("modified");
    let failed = next(&mut deliveries).await;
    assert_eq!(id(&failed), "m-2");
    assert_eq!(header_int(&failed, "x-delivery-count"), Some(1));
    assert!(failed.redelivered, "delivery-count > 0 in the header");

    // modified with a delivery time: held back until then on 4.3, with the
    // annotations as headers.
    let at = now_ms() + 500;
    let settled = Instant::now();
    failed
        .acker
        .modify(
            Modification::failed()
                .annotate("x-opt-delivery-time", AnnotationValue::Timestamp(at))
                .annotate(
                    "x-opt-error",
                    AnnotationValue::String("upstream timed out".into()),
                )
                .annotate("x-opt-retry-count", AnnotationValue::Uint(1)),
        )
        .await
        .expect("modified with annotations");
    let held = next(&mut deliveries).await;
    let came_back = now_ms();
    eprintln!("asked for 500 ms, came back after {:?}", settled.elapsed());
    if holds_back {
        assert!(came_back >= at, "came back {} ms early", at - came_back);
        assert!(
            came_back <= at + LATE_BOUND.as_millis() as i64,
            "came back {} ms late",
            came_back - at
        );
    }
    assert_eq!(
        header_str(&held, "x-opt-error").as_deref(),
        Some("upstream timed out")
    );
    assert_eq!(header_int(&held, "x-opt-retry-count"), Some(1));
    assert_eq!(header_int(&held, "x-delivery-count"), Some(2));
    assert!(header(&held, "x-opt-delivery-time").is_some());

    // modified, undeliverable here: dead-lettered with its annotations.
    held.acker
        .modify(
            Modification::undeliverable()
                .annotate("x-opt-error", AnnotationValue::String("for good".into())),
        )
        .await
        .expect("modified, undeliverable");
    let dead = fixture.dead_letter().await;
    let headers = dead
        .delivery
        .properties
        .headers()
        .clone()
        .unwrap_or_default();
    assert_eq!(
        headers.inner().get("x-opt-error"),
        Some(&text("for good")),
        "{headers:?}"
    );
    assert_eq!(dead.delivery.data, b"job");
    assert_eq!(fixture.depth(&fixture.queue).await, 0);

    channel.close().await;
    connection.close().await;
    fixture.close().await;
}

#[tokio::test]
async fn ack_multiple_settles_every_earlier_delivery() {
    let _serial = SERIAL.lock().await;
    let Some((connection, channel)) = amqp1().await else {
        return;
    };
    let fixture = Fixture::new("amqp1-multiple").await;
    for n in 1..=3 {
        fixture.publish(&format!("m-{n}"), b"x").await;
    }
    channel.qos(10).await.expect("qos");
    let mut deliveries = channel.consume(&fixture.queue).await.expect("consume");
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(next(&mut deliveries).await);
    }
    let tags: Vec<u64> = got.iter().map(|d| d.acker.delivery_tag()).collect();
    assert_eq!(tags, [1, 2, 3]);
    got[2]
        .acker
        .ack_multiple()
        .await
        .expect("accepted, all three");
    assert!(
        got[0].acker.ack().await.is_err(),
        "settled by the multiple ack"
    );
    assert!(
        got[1].acker.requeue().await.is_err(),
        "settled by the multiple ack"
    );
    channel.close().await;
    // Nothing comes back once the session is gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fixture.depth(&fixture.queue).await, 0);
    connection.close().await;
    fixture.close().await;
}

#[tokio::test]
async fn cancel_returns_unsettled_deliveries_and_get_takes_them_one_by_one() {
    let _serial = SERIAL.lock().await;
    let Some((connection, channel)) = amqp1().await else {
        return;
    };
    let fixture = Fixture::new("amqp1-cancel").await;
    for n in 1..=2 {
        fixture.publish(&format!("m-{n}"), b"x").await;
    }
    channel.qos(5).await.expect("qos");
    let mut deliveries = channel.consume(&fixture.queue).await.expect("consume");
    let first = next(&mut deliveries).await;
    let _second = next(&mut deliveries).await;
    channel
        .cancel(&deliveries.consumer_tag)
        .await
        .expect("detached");
    let ended = tokio::time::timeout(PATIENCE, deliveries.stream.next())
        .await
        .expect("the stream ends");
    assert!(ended.is_none(), "{ended:?}");
    assert!(first.acker.ack().await.is_err(), "its link is gone");
    fixture.wait_depth(&fixture.queue, 2).await;

    // get: one at a time, the link kept until the message is settled.
    let got = channel
        .get(&fixture.queue)
        .await
        .expect("get")
        .expect("a message");
    assert_eq!(id(&got), "m-1");
    got.acker.ack().await.expect("accepted");
    let got = channel
        .get(&fixture.queue)
        .await
        .expect("get")
        .expect("a message");
    assert_eq!(id(&got), "m-2");
    got.acker.ack().await.expect("accepted");
    let started = Instant::now();
    assert!(channel.get(&fixture.queue).await.expect("get").is_none());
    eprintln!("an empty queue's get took {:?}", started.elapsed());
    channel.close().await;
    assert_eq!(fixture.depth(&fixture.queue).await, 0);
    connection.close().await;
    fixture.close().await;
}

#[tokio::test]
async fn closing_the_connection_broker_side_fires_lost() {
    let _serial = SERIAL.lock().await;
    let before = amqp1_connections();
    let Some((connection, channel)) = amqp1().await else {
        return;
    };
    let fixture = Fixture::new("amqp1-lost").await;
    let mut deliveries = channel.consume(&fixture.queue).await.expect("consume");
    let ours: Vec<String> = amqp1_connections()
        .into_iter()
        .filter(|pid| !before.contains(pid))
        .collect();
    assert!(
        !ours.is_empty(),
        "the broker lists the new AMQP 1.0 connection"
    );
    let lost = connection.lost();
    assert!(!lost.is_lost());
    for pid in &ours {
        rabbitmqctl_output(&["close_connection", pid, "amqp1 test: closed by the broker"]);
    }
    let why = tokio::time::timeout(PATIENCE, lost.wait())
        .await
        .expect("lost fires");
    eprintln!("lost: {why}");
    let ended = tokio::time::timeout(PATIENCE, deliveries.stream.next())
        .await
        .expect("the stream ends");
    assert!(
        matches!(ended, Some(Err(TransportError::Closed(_)))),
        "{ended:?}"
    );
    assert!(connection.open_channel().await.is_err());
    assert!(connection.open_holding_channel().await.is_err());
    channel.close().await;
    connection.close().await;
    fixture.close().await;
}

/// Messages published over AMQP 1.0 with bodies and annotations AMQP
/// 0-9-1 cannot make: each arrives as a delivery, decoded as far as the
/// transport's model goes, and settles.
#[tokio::test]
async fn odd_messages_published_over_amqp_1_0_arrive_whole() {
    use fe2o3_amqp::types::messaging::annotations::OwnedKey;
    use fe2o3_amqp::types::messaging::{
        ApplicationProperties, Message, MessageAnnotations, MessageId, Outcome, Properties,
    };
    use fe2o3_amqp::types::primitives::{OrderedMap, SimpleValue, Symbol, Value};

    let _serial = SERIAL.lock().await;
    let Some((connection, channel)) = amqp1().await else {
        return;
    };
    let fixture = Fixture::new("amqp1-odd").await;

    // Published with fe2o3-amqp itself, to the same queue.
    let url = url();
    let (scheme, rest) = url.split_once("://").unwrap_or(("amqp", url.as_str()));
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let mut publisher = fe2o3_amqp::Connection::open(
        "amqp1-odd-publisher",
        format!("{scheme}://{authority}").as_str(),
    )
    .await
    .expect("an AMQP 1.0 connection to publish on");
    let mut session = fe2o3_amqp::Session::begin(&mut publisher)
        .await
        .expect("a session");
    let mut sender = fe2o3_amqp::Sender::attach(
        &mut session,
        "amqp1-odd-sender",
        format!("/queues/{}", fixture.queue).as_str(),
    )
    .await
    .expect("a sender");

    let mut deep = Value::String("leaf".into());
    for _ in 0..100 {
        deep = Value::List(vec![deep]);
    }
    let mut nested = OrderedMap::new();
    nested.insert(
        Value::String("a".into()),
        Value::List(vec![Value::Int(1), Value::Bool(true)]),
    );
    let mut annotations = OrderedMap::new();
    annotations.insert(
        OwnedKey::Symbol(Symbol::from("x-opt-nested")),
        Value::Map(nested),
    );
    annotations.insert(OwnedKey::Symbol(Symbol::from("x-opt-deep")), deep);
    let mut application = OrderedMap::new();
    application.insert("k".to_owned(), SimpleValue::Long(5));
    let uuid = uuid::Uuid::new_v4();
    let message = Message::builder()
        .properties(Properties {
            message_id: Some(MessageId::Uuid((*uuid.as_bytes()).into())),
            ..Properties::default()
        })
        .application_properties(ApplicationProperties(application))
        .message_annotations(MessageAnnotations(annotations))
        .value("hello".to_owned())
        .build();
    let outcome = sender.send(message).await.expect("sent");
    assert!(matches!(outcome, Outcome::Accepted(_)), "{outcome:?}");
    let outcome = sender
        .send(Message::builder().value(7i32).build())
        .await
        .expect("sent");
    assert!(matches!(outcome, Outcome::Accepted(_)), "{outcome:?}");
    let outcome = sender
        .send(
            Message::builder()
                .sequence(vec![Value::String("a".into()), Value::Int(1)])
                .build(),
        )
        .await
        .expect("sent");
    assert!(matches!(outcome, Outcome::Accepted(_)), "{outcome:?}");
    let outcome = sender
        .send(
            Message::builder()
                .data_batch([b"ab".to_vec(), b"cd".to_vec()])
                .build(),
        )
        .await
        .expect("sent");
    assert!(matches!(outcome, Outcome::Accepted(_)), "{outcome:?}");

    channel.qos(10).await.expect("qos");
    let mut deliveries = channel.consume(&fixture.queue).await.expect("consume");

    let string = next(&mut deliveries).await;
    assert_eq!(string.data, b"hello");
    assert_eq!(id(&string), uuid.hyphenated().to_string());
    assert_eq!(header_int(&string, "k"), Some(5));
    let Some(AMQPValue::FieldTable(table)) = header(&string, "x-opt-nested") else {
        panic!(
            "a map annotation is a table: {:?}",
            string.properties.headers()
        );
    };
    assert_eq!(
        table.inner().get("a"),
        Some(&AMQPValue::FieldArray(
            vec![AMQPValue::LongLongInt(1), AMQPValue::Boolean(true)].into()
        ))
    );
    let mut depth = 0;
    let mut level = header(&string, "x-opt-deep");
    while let Some(AMQPValue::FieldArray(items)) = level {
        depth += 1;
        level = items.as_slice().first();
    }
    assert_eq!(depth, 65, "lists kept to the depth limit, the rest dropped");

    let int = next(&mut deliveries).await;
    assert_eq!(
        &int.data[..3],
        [0x00, 0x53, 0x77],
        "an amqp-value int: its section's encoding"
    );
    assert!(int.data.len() > 3);
    let sequence = next(&mut deliveries).await;
    assert_eq!(&sequence.data[..3], [0x00, 0x53, 0x76]);
    let data = next(&mut deliveries).await;
    assert_eq!(data.data, b"abcd");
    data.acker.ack_multiple().await.expect("all four accepted");
    channel.close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fixture.depth(&fixture.queue).await, 0);

    sender.close().await.expect("detach the sender");
    let _ = session.end().await;
    let _ = publisher.close().await;
    connection.close().await;
    fixture.close().await;
}

/// A virtual host other than the default one: RabbitMQ 4 reads it from the
/// open frame's hostname (`vhost:<name>`), and a queue of that vhost is
/// consumed there.
#[tokio::test]
async fn a_vhost_of_the_uri_is_the_connection_s() {
    let _serial = SERIAL.lock().await;
    if broker_version() < (4, 0) {
        // The refusal is asserted by the other tests.
        assert!(amqp1().await.is_none());
        return;
    }
    let vhost = unique("amqp1-vhost");
    rabbitmqctl_output(&["add_vhost", &vhost]);
    rabbitmqctl_output(&["set_permissions", "-p", &vhost, "guest", ".*", ".*", ".*"]);
    struct DeleteVhost(String);
    impl Drop for DeleteVhost {
        fn drop(&mut self) {
            let _ = rabbitmqctl().args(["delete_vhost", &self.0]).output();
        }
    }
    let _delete = DeleteVhost(vhost.clone());
    let base = url();
    let root = base
        .rsplit_once('/')
        .map_or(base.as_str(), |(root, _)| root);
    let vhost_url = format!("{root}/{}", vhost.replace('.', "%2E"));

    let lapin = lapin::Connection::connect(&vhost_url, lapin::ConnectionProperties::default())
        .await
        .expect("AMQP 0-9-1 on the vhost");
    let channel = lapin.create_channel().await.expect("a channel");
    let queue = "in-the-vhost";
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), text("quorum"));
    channel
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            args,
        )
        .await
        .expect("declare");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            b"in the vhost",
            BasicProperties::default(),
        )
        .await
        .expect("publish")
        .await
        .expect("confirmed");

    let (connection, consuming) = amqp1_connect(&vhost_url)
        .await
        .expect("AMQP 1.0 on the vhost");
    let mut deliveries = consuming.consume(queue).await.expect("the vhost's queue");
    let delivery = next(&mut deliveries).await;
    assert_eq!(delivery.data, b"in the vhost");
    tokio::time::timeout(Duration::from_secs(5), delivery.acker.ack())
        .await
        .expect("ack answers")
        .expect("accepted");
    consuming.close().await;
    connection.close().await;
    // The default vhost has no such queue.
    let (default, elsewhere) = amqp1().await.expect("AMQP 1.0 on the default vhost");
    let missing = elsewhere.consume(queue).await.err();
    assert!(
        missing.as_ref().is_some_and(TransportError::is_not_found),
        "{missing:?}"
    );
    default.close().await;
    let _ = lapin.close(200, "done".into()).await;
}

/// A backlog: 2,000 messages wait before the consumer starts, and eight
/// workers settle them out of order, holding a tenth of them back once with
/// `modified`. On RabbitMQ 4.3 fe2o3-amqp counts transfers twice that wait
/// in the link's buffer when the broker's first `flow` arrives, and drops
/// what it then takes for beyond the credit: the link is attached so that
/// the flow comes with nothing in flight (and recycled should it not), so
/// the consumer's stream never ends, no message is handed over twice, and
/// every one is settled.
#[tokio::test]
async fn a_backlog_settled_out_of_order_keeps_its_stream_and_hands_each_over_once() {
    let _serial = SERIAL.lock().await;
    let Some((connection, channel)) = amqp1().await else {
        return;
    };
    let fixture = Fixture::new("amqp1-backlog").await;
    const N: usize = 2000;
    let mut confirms = Vec::new();
    for n in 0..N {
        let confirm = fixture
            .channel
            .basic_publish(
                "".into(),
                fixture.queue.as_str().into(),
                BasicPublishOptions::default(),
                b"x",
                BasicProperties::default().with_message_id(ShortString::from(format!("m-{n}"))),
            )
            .await
            .expect("publish");
        confirms.push(confirm);
    }
    for confirm in confirms {
        assert!(confirm.await.expect("a confirm").is_ack());
    }
    let held_back = (0..N).filter(|n| n % 10 == 7).count();
    channel.qos(40).await.expect("qos");
    let mut deliveries = channel.consume(&fixture.queue).await.expect("consume");
    let (to_workers, from_stream) = tokio::sync::mpsc::channel::<Delivery>(1);
    let from_stream = Arc::new(Mutex::new(from_stream));
    let seen = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
        String,
        u32,
    >::new()));
    let mut workers = Vec::new();
    for worker in 0..8u64 {
        let from_stream = from_stream.clone();
        let seen = seen.clone();
        workers.push(tokio::spawn(async move {
            loop {
                let Some(delivery) = from_stream.lock().await.recv().await else {
                    return;
                };
                tokio::time::sleep(Duration::from_millis(1 + worker % 4)).await;
                let id = id(&delivery);
                let times = {
                    let mut seen = seen.lock().expect("not poisoned");
                    let times = seen.entry(id.clone()).or_default();
                    *times += 1;
                    *times
                };
                let settled = if times == 1 && id.ends_with('7') {
                    let hold = Modification::failed().annotate(
                        "x-opt-delivery-time",
                        AnnotationValue::Timestamp(now_ms() + 200),
                    );
                    delivery.acker.modify(hold).await
                } else {
                    delivery.acker.ack().await
                };
                settled.unwrap_or_else(|e| panic!("{id}: {e}"));
            }
        }));
    }
    let started = Instant::now();
    let mut handed_over = 0;
    while handed_over < N + held_back {
        let delivery = tokio::time::timeout(PATIENCE, deliveries.stream.next())
            .await
            .unwrap_or_else(|_| panic!("{handed_over} deliveries, then none for {PATIENCE:?}"))
            .expect("the stream goes on")
            .unwrap_or_else(|e| panic!("after {handed_over} deliveries: {e}"));
        handed_over += 1;
        to_workers.send(delivery).await.expect("the workers run");
    }
    drop(to_workers);
    for worker in workers {
        worker.await.expect("a worker");
    }
    eprintln!(
        "a backlog of {N} ({held_back} held back once): {handed_over} deliveries in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let seen = seen.lock().expect("not poisoned").clone();
    assert_eq!(seen.len(), N, "every message was handed over");
    let twice: Vec<_> = seen
        .iter()
        .filter(|(id, times)| **times != if id.ends_with('7') { 2 } else { 1 })
        .collect();
    assert!(
        twice.is_empty(),
        "handed over more often than settled for: {twice:?}"
    );
    // Nothing is left: nothing more comes, and the queue is empty.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), deliveries.stream.next())
            .await
            .is_err(),
        "a delivery after the last"
    );
    fixture.wait_depth(&fixture.queue, 0).await;
    channel.close().await;
    connection.close().await;
    fixture.close().await;
}
