//! RabbitMQ 4.3's held-back retry over AMQP 1.0, with the client the
//! framework will use for it (fe2o3-amqp; docs/amqp-1.0.md): a consumer
//! settles a delivery from a quorum queue as `modified` with
//! `delivery-failed`, the annotation `x-opt-delivery-time` and annotations of
//! its own, and the queue delivers the message again no earlier than asked,
//! with those annotations; `modified` with `undeliverable-here` dead-letters
//! it through the queue's dead-letter exchange, where an AMQP 0-9-1 consumer
//! sees the annotations as headers.
//!
//! On whichever broker `AMQP_URL` names, the test asserts what that broker
//! does: 4.3 and later hold the message back; 4.0 to 4.2 serve AMQP 1.0 but
//! deliver it again at once; 3.x without its AMQP 1.0 plugin answers the
//! AMQP 1.0 protocol header with AMQP 0-9-1's.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Cleanup, broker_version, declare, header_int, header_str, next_message, unique, url};
use fe2o3_amqp::connection::{ConnectionHandle, OpenError};
use fe2o3_amqp::link::delivery::Delivery;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::link::{Receiver, Sender};
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::messaging::annotations::AnnotationKey;
use fe2o3_amqp::types::messaging::{Body, Message, Modified, Outcome};
use fe2o3_amqp::types::primitives::{OrderedMap, Symbol, Timestamp, Value};
use fe2o3_amqp::{Connection, Session};
use rabbit_backoff_test_support::amqp1;

/// The delays a consumer asks for, one a hop: an exponential schedule.
const SCHEDULE_MS: [i64; 3] = [300, 900, 2700];
/// How late a held-back redelivery may come (the broker's timer, the test's
/// scheduling on a busy machine).
const LATE_BOUND_MS: i64 = 1500;
/// AMQP 0-9-1's protocol header, with which a broker that does not speak
/// AMQP 1.0 answers an AMQP 1.0 client's.
const AMQP_0_9_1_HEADER: &[u8] = b"AMQP\x00\x00\x09\x01";

#[tokio::test]
async fn modified_with_a_delivery_time_holds_the_message_back_on_4_3() {
    let version = broker_version();
    let connection = Connection::open("rbt-held-retry", amqp1::address(&url()).as_str()).await;
    if version < (4, 0) {
        // 3.x speaks AMQP 1.0 only through the rabbitmq_amqp1_0 plugin; without
        // it the node answers with AMQP 0-9-1's protocol header.
        match connection {
            Err(OpenError::ProtocolHeaderMismatch(header)) => {
                assert_eq!(
                    &header[..],
                    AMQP_0_9_1_HEADER,
                    "RabbitMQ {version:?} answered AMQP 1.0 with another header"
                );
            }
            Err(e) => panic!(
                "RabbitMQ {version:?}: expected the AMQP 0-9-1 protocol header in answer to AMQP 1.0, got {e:?}"
            ),
            Ok(_) => panic!(
                "RabbitMQ {version:?} accepted an AMQP 1.0 connection: is the rabbitmq_amqp1_0 plugin enabled? It knows no /queues/ address and holds nothing back"
            ),
        }
        return;
    }
    let mut connection =
        connection.unwrap_or_else(|e| panic!("RabbitMQ {version:?} refused AMQP 1.0: {e:?}"));
    let holds_back = version >= (4, 3);

    let queue = unique("held-retry");
    let dlx = format!("{queue}.dlx");
    let dlq = format!("{queue}.dlq");
    let _cleanup = Cleanup::default().queue(&queue).queue(&dlq).exchange(&dlx);
    let (amqp091, channel) = common::channel().await;
    // The quorum queue a consumer reads, dead-lettering at least once
    // through `dlx` into `dlq`.
    declare::held_retry_queue(&channel, &queue, &dlx, &dlq, &[]).await;

    let mut session = Session::begin(&mut connection)
        .await
        .expect("begin a session");
    let address = format!("/queues/{queue}");
    let mut sender = Sender::attach(&mut session, "rbt-held-retry-sender", address.as_str())
        .await
        .expect("attach a sender to the quorum queue");
    let outcome = sender
        .send(Message::builder().value("job 7".to_owned()).build())
        .await
        .expect("publish");
    assert!(matches!(outcome, Outcome::Accepted(_)), "{outcome:?}");
    // Link credit is the prefetch: one message in flight.
    let mut receiver = Receiver::builder()
        .name("rbt-held-retry-receiver")
        .source(address.as_str())
        .credit_mode(CreditMode::Auto(1))
        .attach(&mut session)
        .await
        .expect("attach a receiver to the quorum queue");

    let mut delivery = receive(&mut receiver, Duration::from_secs(10)).await;
    assert_eq!(annotation(&delivery, "x-opt-error"), None);
    assert_eq!(integer(&delivery, "x-delivery-count"), None);

    let schedule: &[i64] = if holds_back {
        &SCHEDULE_MS
    } else {
        &SCHEDULE_MS[2..]
    };
    for (hop, &delay) in schedule.iter().enumerate() {
        let retry = hop as i64 + 1;
        let error = format!("hop {retry}: upstream timed out");
        let at = now_ms() + delay;
        let mut annotations = OrderedMap::new();
        annotations.insert(
            Symbol::from("x-opt-delivery-time"),
            Value::Timestamp(Timestamp::from_milliseconds(at)),
        );
        annotations.insert(Symbol::from("x-opt-error"), Value::String(error.clone()));
        annotations.insert(Symbol::from("x-opt-retry-count"), Value::Uint(retry as u32));
        let settled = Instant::now();
        receiver
            .modify(
                &delivery,
                Modified {
                    delivery_failed: Some(true),
                    undeliverable_here: Some(false),
                    message_annotations: Some(annotations),
                },
            )
            .await
            .expect("settle as modified");
        delivery = receive(&mut receiver, Duration::from_secs(15)).await;
        let came_back = now_ms();
        let waited = settled.elapsed();
        eprintln!("hop {retry}: asked for {delay} ms, came back after {waited:?}");
        if holds_back {
            assert!(
                came_back >= at,
                "hop {retry}: asked for {delay} ms, came back {} ms early (after {waited:?})",
                at - came_back
            );
            assert!(
                came_back <= at + LATE_BOUND_MS,
                "hop {retry}: asked for {delay} ms, came back {} ms late (after {waited:?})",
                came_back - at
            );
            assert_eq!(integer(&delivery, "x-acquired-count"), Some(retry));
        } else {
            // 4.0 to 4.2 take the annotations but not the time.
            assert!(
                came_back < at - delay / 2,
                "RabbitMQ {version:?} held the message back {waited:?} of the {delay} ms asked: does it honour x-opt-delivery-time after all?"
            );
        }
        assert_eq!(
            annotation(&delivery, "x-opt-error"),
            Some(&Value::String(error)),
            "hop {retry}: the annotations of `modified` come back"
        );
        assert_eq!(integer(&delivery, "x-opt-retry-count"), Some(retry));
        assert_eq!(integer(&delivery, "x-opt-delivery-time"), Some(at));
        assert_eq!(integer(&delivery, "x-delivery-count"), Some(retry));
    }

    // The last failure dead-letters the message, with its annotations, in
    // the same settlement.
    let retries = schedule.len() as i64;
    let mut annotations = OrderedMap::new();
    annotations.insert(
        Symbol::from("x-opt-error"),
        Value::String("upstream timed out for good".to_owned()),
    );
    annotations.insert(
        Symbol::from("x-opt-reason"),
        Value::String("retries exhausted".to_owned()),
    );
    annotations.insert(
        Symbol::from("x-opt-retry-count"),
        Value::Uint(retries as u32),
    );
    receiver
        .modify(
            &delivery,
            Modified {
                delivery_failed: Some(true),
                undeliverable_here: Some(true),
                message_annotations: Some(annotations),
            },
        )
        .await
        .expect("settle as modified, undeliverable here");

    let dead = next_message(&channel, &dlq, Duration::from_secs(10)).await;
    let props = &dead.delivery.properties;
    assert_eq!(
        header_str(props, "x-opt-error").as_deref(),
        Some("upstream timed out for good")
    );
    assert_eq!(
        header_str(props, "x-opt-reason").as_deref(),
        Some("retries exhausted")
    );
    assert_eq!(header_int(props, "x-opt-retry-count"), Some(retries));
    assert_eq!(header_int(props, "x-delivery-count"), Some(retries + 1));
    assert_eq!(
        header_str(props, "x-last-death-reason").as_deref(),
        Some("rejected")
    );
    assert_eq!(
        header_str(props, "x-first-death-queue").as_deref(),
        Some(queue.as_str())
    );
    // Nothing is left behind: the queue is empty and delivers nothing more.
    assert_eq!(common::depth(&channel, &queue).await, 0);
    assert!(
        tokio::time::timeout(Duration::from_millis(500), receiver.recv::<Body<Value>>())
            .await
            .is_err(),
        "a dead-lettered message was delivered again"
    );

    receiver.close().await.expect("detach the receiver");
    sender.close().await.expect("detach the sender");
    end(session, connection).await;
    let _ = amqp091.close(200, "done".into()).await;
}

async fn receive(receiver: &mut Receiver, within: Duration) -> Delivery<Body<Value>> {
    tokio::time::timeout(within, receiver.recv::<Body<Value>>())
        .await
        .unwrap_or_else(|_| panic!("no delivery within {within:?}"))
        .expect("receive a delivery")
}

fn annotation<'a>(delivery: &'a Delivery<Body<Value>>, name: &str) -> Option<&'a Value> {
    delivery
        .message()
        .message_annotations
        .as_ref()?
        .get(&name as &dyn AnnotationKey)
}

/// An annotation that is a number, whichever AMQP type carries it (RabbitMQ
/// gives back a `uint` or a `timestamp` it was given as a `long`).
fn integer(delivery: &Delivery<Body<Value>>, name: &str) -> Option<i64> {
    Some(match annotation(delivery, name)? {
        Value::Long(v) => *v,
        Value::Ulong(v) => i64::try_from(*v).ok()?,
        Value::Uint(v) => (*v).into(),
        Value::Int(v) => (*v).into(),
        Value::Timestamp(t) => t.milliseconds(),
        other => panic!("{name} is not a number: {other:?}"),
    })
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_millis() as i64
}

async fn end(mut session: SessionHandle<()>, mut connection: ConnectionHandle<()>) {
    session.end().await.expect("end the session");
    connection.close().await.expect("close the connection");
}
