//! Consumers and settlement: round robin, prefetch, order, redelivery,
//! requeue positions, cancel, and what closing a channel returns.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::types::AMQPValue;

use super::*;

/// A broker and a channel, with the quorum queue `qq` holding m1, m2 and
/// m3.
async fn quorum_of_three() -> (TestBroker, Arc<dyn Channel>) {
    let (broker, ch) = setup().await;
    ch.declare_queue(&decl("qq", vec![text("x-queue-type", "quorum")]))
        .await
        .unwrap();
    for m in ["m1", "m2", "m3"] {
        put(&ch, "qq", m).await;
    }
    (broker, ch)
}

#[tokio::test(start_paused = true)]
async fn consumers_take_turns() {
    let (broker, ch) = setup_with(&["q"]).await;
    let other = open(&broker).await;
    let mut first = ch.consume("q").await.unwrap();
    let mut second = other.consume("q").await.unwrap();
    for m in ["m1", "m2", "m3", "m4"] {
        put(&ch, "q", m).await;
    }
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(("first", label(&next(&mut first).await)));
        got.push(("second", label(&next(&mut second).await)));
    }
    assert_eq!(
        got,
        [
            ("first", "m1".to_owned()),
            ("second", "m2".to_owned()),
            ("first", "m3".to_owned()),
            ("second", "m4".to_owned())
        ]
    );
    assert_eq!(broker.consumer_count("q"), 2);
}

#[tokio::test(start_paused = true)]
async fn prefetch_bounds_unsettled_deliveries_per_consumer() {
    let (broker, ch) = setup_with(&["q"]).await;
    ch.qos(2).await.unwrap();
    let mut consumer = ch.consume("q").await.unwrap();
    for m in ["m1", "m2", "m3", "m4", "m5"] {
        put(&ch, "q", m).await;
    }
    let m1 = next(&mut consumer).await;
    let m2 = next(&mut consumer).await;
    assert_eq!((label(&m1), label(&m2)), ("m1".into(), "m2".into()));
    assert!(quiet_for(&mut consumer, Duration::from_secs(10)).await);
    assert_eq!(broker.unacked_count("q"), 2);
    assert_eq!(broker.queue_depth("q"), 3);

    m1.acker.ack().await.unwrap();
    assert_eq!(label(&next(&mut consumer).await), "m3");
    assert!(quiet_for(&mut consumer, Duration::from_secs(10)).await);
    // A requeue frees a slot too: m2 comes back ahead of m4.
    m2.acker.requeue().await.unwrap();
    let again = next(&mut consumer).await;
    assert_eq!(label(&again), "m2");
    assert!(again.redelivered);
}

#[tokio::test(start_paused = true)]
async fn prefetch_is_per_consumer_and_set_before_consuming() {
    let (broker, ch) = setup_with(&["q"]).await;
    ch.qos(1).await.unwrap();
    let mut a = ch.consume("q").await.unwrap();
    let mut b = ch.consume("q").await.unwrap();
    ch.qos(0).await.unwrap();
    let mut unlimited = ch.consume("q").await.unwrap();
    for m in ["m1", "m2", "m3", "m4", "m5"] {
        put(&ch, "q", m).await;
    }
    assert_eq!(label(&next(&mut a).await), "m1");
    assert_eq!(label(&next(&mut b).await), "m2");
    // a and b are full: the rest go to the unlimited consumer.
    for m in ["m3", "m4", "m5"] {
        assert_eq!(label(&next(&mut unlimited).await), m);
    }
    assert!(quiet_for(&mut a, Duration::from_secs(1)).await);
    assert_eq!(broker.unacked_count("q"), 5);
}

#[tokio::test(start_paused = true)]
async fn a_classic_queue_requeues_messages_at_their_original_position() {
    let (broker, ch) = setup_with(&["q"]).await;
    for m in ["m1", "m2", "m3", "m4"] {
        put(&ch, "q", m).await;
    }
    let m1 = take(&ch, "q").await;
    let m2 = take(&ch, "q").await;
    let m3 = take(&ch, "q").await;
    assert!(!m1.redelivered);

    m3.acker.requeue().await.unwrap();
    assert_eq!(labels(&broker, "q"), ["m3", "m4"]);
    m1.acker.requeue().await.unwrap();
    assert_eq!(labels(&broker, "q"), ["m1", "m3", "m4"]);
    m2.acker.requeue().await.unwrap();
    assert_eq!(labels(&broker, "q"), ["m1", "m2", "m3", "m4"]);
    let redelivered: Vec<bool> = broker
        .messages("q")
        .iter()
        .map(|m| m.redelivered())
        .collect();
    assert_eq!(redelivered, [true, true, true, false]);
    let again = take(&ch, "q").await;
    assert_eq!(label(&again), "m1");
    assert!(again.redelivered);
}

#[tokio::test(start_paused = true)]
async fn a_quorum_queue_requeues_at_the_back_and_counts_deliveries() {
    let (broker, ch) = quorum_of_three().await;
    let m1 = take(&ch, "qq").await;
    assert_eq!(header(&m1.properties, "x-delivery-count"), None);
    m1.acker.requeue().await.unwrap();
    assert_eq!(labels(&broker, "qq"), ["m2", "m3", "m1"]);

    for expected in ["m2", "m3"] {
        let d = take(&ch, "qq").await;
        assert_eq!(label(&d), expected);
        d.acker.ack().await.unwrap();
    }
    let m1 = take(&ch, "qq").await;
    assert!(m1.redelivered);
    assert_eq!(
        header(&m1.properties, "x-delivery-count"),
        Some(&AMQPValue::LongLongInt(1))
    );
}

#[tokio::test(start_paused = true)]
async fn closing_a_channel_returns_its_unsettled_deliveries_in_order() {
    let (broker, ch) = setup_with(&["q"]).await;
    let consuming = open(&broker).await;
    let mut consumer = consuming.consume("q").await.unwrap();
    for m in ["m1", "m2", "m3"] {
        put(&ch, "q", m).await;
    }
    let held: Vec<Delivery> = vec![
        next(&mut consumer).await,
        next(&mut consumer).await,
        next(&mut consumer).await,
    ];
    let got = consuming.get("q").await.unwrap();
    assert!(got.is_none());
    put(&ch, "q", "m4").await;
    assert_eq!(broker.unacked_count("q"), 4);
    held[1].acker.ack().await.unwrap();

    consuming.close().await;
    assert_eq!(labels(&broker, "q"), ["m1", "m3", "m4"]);
    let redelivered: Vec<bool> = broker
        .messages("q")
        .iter()
        .map(|m| m.redelivered())
        .collect();
    assert_eq!(redelivered, [true, true, true]);
    assert_eq!(broker.unacked_count("q"), 0);
    assert_eq!(broker.consumer_count("q"), 0);
    // A user's close ends the stream without an error.
    assert!(consumer.stream.next().await.is_none());
    assert!(matches!(
        held[0].acker.ack().await,
        Err(TransportError::Closed(_))
    ));
    assert!(matches!(
        consuming.get("q").await,
        Err(TransportError::Closed(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_quorum_queue_serves_messages_returned_by_a_closing_channel_first() {
    let (broker, ch) = quorum_of_three().await;
    let other = open(&broker).await;
    let _m1 = take(&other, "qq").await;
    let _m2 = take(&other, "qq").await;
    other.close().await;
    assert_eq!(labels(&broker, "qq"), ["m1", "m2", "m3"]);
    let m1 = take(&ch, "qq").await;
    assert_eq!(
        header(&m1.properties, "x-delivery-count"),
        Some(&AMQPValue::LongLongInt(1))
    );
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_deliveries_and_ends_the_stream() {
    let (broker, ch) = setup_with(&["q"]).await;
    let mut consumer = ch.consume("q").await.unwrap();
    put(&ch, "q", "m1").await;
    let m1 = next(&mut consumer).await;

    ch.cancel(&consumer.consumer_tag).await.unwrap();
    assert!(consumer.stream.next().await.is_none());
    put(&ch, "q", "m2").await;
    assert_eq!(labels(&broker, "q"), ["m2"]);
    assert_eq!(broker.consumer_count("q"), 0);
    // What it holds stays unsettled until settled.
    assert_eq!(broker.unacked_count("q"), 1);
    m1.acker.ack().await.unwrap();
    assert_eq!(broker.unacked_count("q"), 0);
    // Cancelling an unknown tag is harmless, as in RabbitMQ.
    ch.cancel("amq.ctag-unknown").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_delivery_settles_once() {
    let (broker, ch) = setup_with(&["q"]).await;
    put(&ch, "q", "m").await;
    let d = take(&ch, "q").await;
    d.acker.ack().await.unwrap();
    assert!(matches!(
        d.acker.requeue().await,
        Err(TransportError::Closed(_))
    ));
    assert_eq!(broker.queue_depth("q"), 0);
    // The channel is still open.
    assert!(ch.check_queue("q").await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn get_on_an_empty_queue_is_none() {
    let (_broker, ch) = setup_with(&["q"]).await;
    assert!(ch.get("q").await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn closing_a_connection_closes_its_channels_and_returns_their_deliveries() {
    let (broker, ch) = setup_with(&["q"]).await;
    put(&ch, "q", "m").await;
    let connection = broker.connect().await.unwrap();
    let channel = connection.open_channel().await.unwrap();
    let held = take(&channel, "q").await;
    connection.close().await;

    assert!(matches!(
        channel.get("q").await,
        Err(TransportError::Closed(_))
    ));
    assert!(connection.open_channel().await.is_err());
    assert!(held.acker.ack().await.is_err());
    assert_eq!(labels(&broker, "q"), ["m"]);
}

#[tokio::test(start_paused = true)]
async fn a_multiple_ack_settles_every_earlier_delivery_but_not_a_nacked_one_or_a_later_one() {
    let (broker, ch) = setup_with(&["q"]).await;
    let consuming = open(&broker).await;
    let mut consumer = consuming.consume("q").await.unwrap();
    for m in ["m1", "m2", "m3", "m4", "m5"] {
        put(&ch, "q", m).await;
    }
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(next(&mut consumer).await);
    }
    let tags: Vec<u64> = held.iter().map(|d| d.acker.delivery_tag()).collect();
    assert!(tags.windows(2).all(|w| w[0] < w[1]), "{tags:?} ascend");
    // m2 goes back first; the ack of m4 with `multiple` settles m1, m3, m4.
    held[1].acker.requeue().await.unwrap();
    let again = next(&mut consumer).await;
    assert_eq!(label(&again), "m2");
    held[3].acker.ack_multiple().await.unwrap();
    assert_eq!(broker.unacked_count("q"), 2, "m5 and the redelivered m2");
    assert!(
        matches!(held[0].acker.ack().await, Err(TransportError::Closed(_))),
        "m1 is settled already"
    );
    // The redelivered m2 has a later tag than m5: a multiple ack of m5
    // leaves it.
    held[4].acker.ack_multiple().await.unwrap();
    assert_eq!(broker.unacked_count("q"), 1);
    again.acker.ack().await.unwrap();
    assert_eq!(broker.unacked_count("q"), 0);
    assert_eq!(broker.queue_depth("q"), 0);
}
