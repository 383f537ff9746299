//! RabbitMQ 4.3 (`Release::V4_3`): quorum queues hold deliveries back. A
//! delivery of a holding channel settled as `modified` waits until its
//! `x-opt-delivery-time` and comes back with its `x-opt-` annotations as
//! headers; `x-delayed-retry-*` holds a failed delivery back on a ladder;
//! only failed deliveries count; the arguments are refused on a classic
//! queue. And 3.10 (the default) does none of it.

use rabbit_backoff_runtime::transport::{AnnotationValue, Modification, PRECONDITION_FAILED};
use rabbit_backoff_testing::Release;
use tokio::time::Instant;

use super::*;

/// A 4.3 broker, a confirm channel and a holding channel (whose deliveries
/// can be settled as `modified`), and a quorum queue `q` that dead-letters
/// to `dlq`.
async fn quorum_4_3(
    more: Vec<(String, Argument)>,
) -> (TestBroker, Arc<dyn Channel>, Arc<dyn Channel>) {
    let broker = TestBroker::emulating(Release::V4_3);
    let channel = open(&broker).await;
    let amqp1 = broker
        .connect()
        .await
        .expect("connect")
        .open_holding_channel()
        .await
        .expect("a channel");
    declare_plain(&channel, "dlq").await;
    let mut arguments = vec![text("x-queue-type", "quorum")];
    arguments.extend(more);
    declare_dead_lettering(&channel, "q", "dlq", arguments).await;
    (broker, channel, amqp1)
}

/// Unix milliseconds, `after` from now on the framework's clock.
fn unix_ms_in(after: Duration) -> i64 {
    let at = rabbit_backoff_runtime::clock::now() + after;
    at.duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(start_paused = true)]
async fn a_modified_delivery_waits_until_its_time_with_its_annotations() {
    let (broker, channel, amqp1) = quorum_4_3(vec![]).await;
    put(&channel, "q", "m1").await;
    let mut consumer = amqp1.consume("q").await.unwrap();
    let first = next(&mut consumer).await;
    let started = Instant::now();
    first
        .acker
        .modify(
            Modification::failed()
                .annotate(
                    "x-opt-delivery-time",
                    AnnotationValue::Timestamp(unix_ms_in(Duration::from_secs(5))),
                )
                .annotate("x-opt-error", AnnotationValue::String("timeout".into()))
                .annotate("x-opt-retry-count", AnnotationValue::Uint(1))
                .annotate("not-kept", AnnotationValue::Uint(9)),
        )
        .await
        .unwrap();
    assert_eq!(broker.held_count("q"), 1);
    assert_eq!(broker.queue_depth("q"), 0, "held back is not ready");
    assert!(quiet_for(&mut consumer, Duration::from_millis(4_900)).await);
    let again = next(&mut consumer).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_millis(5_100),
        "{waited:?}"
    );
    assert_eq!(label(&again), "m1");
    assert!(again.redelivered);
    let p = &again.properties;
    assert_eq!(
        header(p, "x-opt-error"),
        Some(&AMQPValue::LongString("timeout".into()))
    );
    assert_eq!(
        header(p, "x-opt-retry-count"),
        Some(&AMQPValue::LongUInt(1))
    );
    assert!(matches!(
        header(p, "x-opt-delivery-time"),
        Some(AMQPValue::Timestamp(_))
    ));
    assert_eq!(
        header(p, "not-kept"),
        None,
        "only x-opt- annotations are kept"
    );
    assert_eq!(
        header(p, "x-delivery-count"),
        Some(&AMQPValue::LongLongInt(1))
    );
    assert_eq!(broker.held_count("q"), 0);
}

#[tokio::test(start_paused = true)]
async fn held_messages_come_back_in_the_order_of_their_times() {
    let (_broker, channel, amqp1) = quorum_4_3(vec![]).await;
    put(&channel, "q", "late").await;
    put(&channel, "q", "early").await;
    let mut consumer = amqp1.consume("q").await.unwrap();
    for (wait, expected) in [
        (Duration::from_secs(9), "late"),
        (Duration::from_secs(3), "early"),
    ] {
        let delivery = next(&mut consumer).await;
        assert_eq!(label(&delivery), expected);
        let at = AnnotationValue::Timestamp(unix_ms_in(wait));
        delivery
            .acker
            .modify(Modification::failed().annotate("x-opt-delivery-time", at))
            .await
            .unwrap();
    }
    assert_eq!(label(&next(&mut consumer).await), "early");
    assert_eq!(label(&next(&mut consumer).await), "late");
}

#[tokio::test(start_paused = true)]
async fn an_undeliverable_modification_dead_letters_with_its_annotations() {
    let (broker, channel, amqp1) = quorum_4_3(vec![]).await;
    put(&channel, "q", "m1").await;
    let mut consumer = amqp1.consume("q").await.unwrap();
    next(&mut consumer)
        .await
        .acker
        .modify(
            Modification::undeliverable()
                .annotate("x-opt-reason", AnnotationValue::String("permanent".into())),
        )
        .await
        .unwrap();
    let dead = broker.dead_letters("dlq");
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].header("x-opt-reason"),
        Some(&AMQPValue::LongString("permanent".into()))
    );
    assert_eq!(dead[0].x_death()[0].reason, "rejected");
}

#[tokio::test(start_paused = true)]
async fn only_an_amqp_1_0_delivery_can_be_modified() {
    let (broker, channel, _amqp1) = quorum_4_3(vec![]).await;
    put(&channel, "q", "m1").await;
    let mut consumer = channel.consume("q").await.unwrap();
    let delivery = next(&mut consumer).await;
    let refused = delivery.acker.modify(Modification::failed()).await;
    assert!(refused.is_err());
    delivery
        .acker
        .ack()
        .await
        .expect("still unsettled, and acked");
    assert_eq!(broker.queue_depth("q"), 0);
}

#[tokio::test(start_paused = true)]
async fn delayed_retries_hold_a_failed_delivery_on_a_capped_ladder() {
    let (_broker, channel, _amqp1) = quorum_4_3(vec![
        text("x-delayed-retry-type", "failed"),
        int("x-delayed-retry-min", 100),
        int("x-delayed-retry-max", 250),
    ])
    .await;
    put(&channel, "q", "m1").await;
    let mut consumer = channel.consume("q").await.unwrap();
    let mut waits = Vec::new();
    let mut last = Instant::now();
    for _ in 0..3 {
        let delivery = next(&mut consumer).await;
        waits.push(last.elapsed().as_millis());
        last = Instant::now();
        delivery.acker.fail().await.unwrap();
    }
    let delivery = next(&mut consumer).await;
    waits.push(last.elapsed().as_millis());
    // min × n, capped at max: 100, 200, 250.
    assert_eq!(waits, [0, 100, 200, 250]);
    assert_eq!(
        header(&delivery.properties, "x-delivery-count"),
        Some(&AMQPValue::LongLongInt(3))
    );
    // A requeue is no failed delivery: neither counted nor held back.
    delivery.acker.requeue().await.unwrap();
    let started = Instant::now();
    let again = next(&mut consumer).await;
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(
        header(&again.properties, "x-delivery-count"),
        Some(&AMQPValue::LongLongInt(3))
    );
}

#[tokio::test(start_paused = true)]
async fn the_delayed_retry_arguments_are_refused_on_a_classic_queue_of_4_3_only() {
    let arguments = || {
        vec![
            text("x-delayed-retry-type", "failed"),
            int("x-delayed-retry-min", 1),
        ]
    };
    let (_, channel, _) = quorum_4_3(vec![]).await;
    let (code, reply) = refusal(channel.declare_queue(&decl("c", arguments())).await);
    assert_eq!(code, PRECONDITION_FAILED);
    assert!(
        reply.contains("invalid arg 'x-delayed-retry-min' for queue 'c'")
            && reply.contains("rabbit_classic_queue"),
        "{reply}"
    );
    // 3.10 takes them as any unknown argument, and ignores them.
    let (broker, channel) = setup().await;
    channel
        .declare_queue(&decl("c", arguments()))
        .await
        .expect("accepted");
    declare_dead_lettering(&channel, "q", "c", {
        let mut a = arguments();
        a.push(text("x-queue-type", "quorum"));
        a
    })
    .await;
    put(&channel, "q", "m1").await;
    let mut consumer = channel.consume("q").await.unwrap();
    next(&mut consumer).await.acker.fail().await.unwrap();
    let started = Instant::now();
    next(&mut consumer).await;
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "3.10 delivers it again at once"
    );
    assert_eq!(broker.release(), Release::V3_10);
}
