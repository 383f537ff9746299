//! Declarations, redeclarations and passive checks: RabbitMQ's texts, and a
//! refusal closes the channel.

use futures_util::StreamExt;

use super::*;
use rabbit_backoff_runtime::transport::QueueInfo;

#[tokio::test(start_paused = true)]
async fn redeclaring_with_the_same_arguments_is_idempotent_and_reports_the_depth() {
    let (broker, ch) = setup().await;
    let q = decl("q", vec![int("x-message-ttl", 60_000)]);
    assert_eq!(ch.declare_queue(&q).await.unwrap(), QueueInfo::default());
    put(&ch, "q", "m1").await;
    let _consumer = ch.consume("q").await.unwrap();
    put(&ch, "q", "m2").await;
    let info = ch.declare_queue(&q).await.unwrap();
    // Both were delivered to the consumer; none is ready.
    assert_eq!(info, QueueInfo::new(0, 1));
    assert_eq!(broker.unacked_count("q"), 2);
}

#[tokio::test(start_paused = true)]
async fn an_argument_missing_on_one_side_is_named_with_its_value_and_type() {
    let (broker, ch) = setup_with(&["q"]).await;
    let (code, reply) = refusal(
        ch.declare_queue(&decl("q", vec![int("x-message-ttl", 100)]))
            .await,
    );
    assert_eq!(code, 406);
    assert_eq!(
        reply,
        "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received the value '100' of type 'long' but current is none"
    );

    let ch = open(&broker).await;
    ch.declare_queue(&decl("dl", vec![text("x-dead-letter-exchange", "dlx")]))
        .await
        .unwrap();
    assert_eq!(
        refusal(ch.declare_queue(&decl("dl", vec![])).await).1,
        "PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-exchange' for queue 'dl' in vhost '/': received none but current is the value 'dlx' of type 'longstr'"
    );
}

#[tokio::test(start_paused = true)]
async fn an_argument_with_another_value_is_named_with_both_values() {
    let (_broker, ch) = setup().await;
    ch.declare_queue(&decl("q", vec![int("x-message-ttl", 100)]))
        .await
        .unwrap();
    let text = refusal(
        ch.declare_queue(&decl("q", vec![int("x-message-ttl", 200)]))
            .await,
    )
    .1;
    assert_eq!(
        text,
        "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received '200' but current is '100'"
    );
    // The runtime reads the argument's name with this pattern.
    let name = regex::Regex::new("inequivalent arg '([^']+)'")
        .unwrap()
        .captures(&text)
        .map(|c| c[1].to_owned());
    assert_eq!(name.as_deref(), Some("x-message-ttl"));
}

#[tokio::test(start_paused = true)]
async fn the_first_differing_argument_in_rabbitmq_order_is_named() {
    let (_broker, ch) = setup().await;
    ch.declare_queue(&decl(
        "q",
        vec![
            text("x-queue-type", "quorum"),
            int("x-message-ttl", 100),
            text("x-dead-letter-exchange", "a"),
        ],
    ))
    .await
    .unwrap();
    let text = refusal(
        ch.declare_queue(&decl(
            "q",
            vec![
                text("x-dead-letter-exchange", "b"),
                int("x-message-ttl", 200),
            ],
        ))
        .await,
    )
    .1;
    assert!(
        text.contains("inequivalent arg 'x-message-ttl'"),
        "x-message-ttl comes before x-dead-letter-exchange and x-queue-type: {text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_classic_queue_may_be_redeclared_with_or_without_its_type() {
    let (_broker, ch) = setup_with(&["q"]).await;
    ch.declare_queue(&decl("q", vec![text("x-queue-type", "classic")]))
        .await
        .unwrap();
    let quorum = refusal(
        ch.declare_queue(&decl("q", vec![text("x-queue-type", "quorum")]))
            .await,
    )
    .1;
    assert!(
        quorum.contains("inequivalent arg 'x-queue-type'"),
        "{quorum}"
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_arguments_are_refused_as_rabbitmq_refuses_them() {
    let (broker, ch) = setup().await;
    assert_eq!(
        refusal(
            ch.declare_queue(&decl("q", vec![int("x-message-ttl", -1)]))
                .await
        )
        .1,
        "PRECONDITION_FAILED - invalid arg 'x-message-ttl' for queue 'q' in vhost '/': {value_negative,-1}"
    );
    let ch = open(&broker).await;
    assert_eq!(
        refusal(
            ch.declare_queue(&decl("q", vec![text("x-dead-letter-routing-key", "k")]))
                .await
        )
        .1,
        "PRECONDITION_FAILED - invalid arg 'x-dead-letter-routing-key' for queue 'q' in vhost '/': routing_key_but_no_dlx_defined"
    );
    assert!(!broker.queue_exists("q"));
}

#[tokio::test(start_paused = true)]
async fn a_refusal_closes_the_channel_and_ends_its_consumers_with_the_error() {
    let (broker, ch) = setup_with(&["q"]).await;
    put(&ch, "q", "held").await;
    let mut consumer = ch.consume("q").await.unwrap();
    let held = next(&mut consumer).await;

    let refused = refusal(ch.check_queue("ghost").await);
    assert_eq!(
        refused,
        (404, "NOT_FOUND - no queue 'ghost' in vhost '/'".to_owned())
    );
    match consumer.stream.next().await {
        Some(Err(TransportError::Refused { code: 404, .. })) => {}
        other => panic!("expected the channel's error, got {other:?}"),
    }
    assert!(consumer.stream.next().await.is_none());
    // Every later call fails with the same error.
    assert_eq!(refusal(ch.qos(1).await), refused);
    assert_eq!(refusal(ch.get("q").await), refused);
    // Its unsettled delivery went back to the queue, redelivered.
    assert!(held.acker.ack().await.is_err());
    let back = broker.messages("q");
    assert_eq!(back.len(), 1);
    assert!(back[0].redelivered());
}

#[tokio::test(start_paused = true)]
async fn passive_checks_of_missing_objects_are_not_found() {
    let (broker, ch) = setup().await;
    assert_eq!(
        refusal(ch.check_exchange("ghost").await),
        (
            404,
            "NOT_FOUND - no exchange 'ghost' in vhost '/'".to_owned()
        )
    );
    let ch = open(&broker).await;
    ch.check_exchange("").await.unwrap();
    ch.check_exchange("amq.direct").await.unwrap();
    assert_eq!(
        refusal(ch.consume("ghost").await.map(|d| d.consumer_tag)).0,
        404
    );
    let ch = open(&broker).await;
    assert_eq!(refusal(ch.get("ghost").await).0, 404);
}

#[tokio::test(start_paused = true)]
async fn check_queue_reports_ready_messages_and_consumers() {
    let (_broker, ch) = setup_with(&["q"]).await;
    put(&ch, "q", "a").await;
    put(&ch, "q", "b").await;
    assert_eq!(ch.check_queue("q").await.unwrap(), QueueInfo::new(2, 0));
}

#[tokio::test(start_paused = true)]
async fn connections_negotiate_rabbitmq_frame_max() {
    let broker = TestBroker::new();
    let connection = broker.connect().await.unwrap();
    assert_eq!(connection.frame_max(), 131_072);
}
