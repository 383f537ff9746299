//! Each outcome a holding channel's delivery settles with (accepted,
//! released, modified with and without a delivery time, undeliverable),
//! multiple acks, and a cancelled consumer's deliveries taken back by get.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rabbit_backoff_runtime::transport::{AnnotationValue, Modification, TransportError};
use rabbit_backoff_test_support::broker::unique;

use crate::broker::*;
use crate::fixture::*;
use crate::{LATE_BOUND, PATIENCE, SERIAL};

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
