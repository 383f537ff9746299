//! What arrives: messages published over AMQP 1.0 that AMQP 0-9-1 cannot
//! make, and a backlog settled out of order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::BasicProperties;
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, ShortString};
use rabbit_backoff_runtime::transport::{AnnotationValue, Delivery, Modification};
use rabbit_backoff_test_support::broker::url;
use tokio::sync::Mutex;

use crate::broker::*;
use crate::fixture::*;
use crate::{PATIENCE, SERIAL};

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
    // One message per body type, each of a type of its own: sent one by
    // one, each accepted.
    macro_rules! send_accepted {
        ($message:expr $(,)?) => {{
            let outcome = sender.send($message).await.expect("sent");
            assert!(matches!(outcome, Outcome::Accepted(_)), "{outcome:?}");
        }};
    }
    send_accepted!(message);
    send_accepted!(Message::builder().value(7i32).build());
    send_accepted!(
        Message::builder()
            .sequence(vec![Value::String("a".into()), Value::Int(1)])
            .build(),
    );
    send_accepted!(
        Message::builder()
            .data_batch([b"ab".to_vec(), b"cd".to_vec()])
            .build(),
    );

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
