//! Dead-lettering: the `x-death` header RabbitMQ 3.10 writes (fields,
//! types, counts, order), the routes it takes, and each reason.

use std::time::Duration;

use lapin::types::{AMQPValue, FieldArray, LongString};
use rabbit_backoff_core::ExchangeKind;
use tokio::time::sleep;

use super::*;
use rabbit_backoff_runtime::transport::Confirm;

fn longstr(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The framework's work queue: published through its own exchange,
/// dead-lettering to `orders.dlx` / `orders.dlq`.
async fn work_topology(ch: &Arc<dyn Channel>) {
    ch.declare_exchange("orders", ExchangeKind::Direct)
        .await
        .unwrap();
    ch.declare_exchange("orders.dlx", ExchangeKind::Direct)
        .await
        .unwrap();
    ch.declare_queue(&decl(
        "orders",
        vec![
            text("x-dead-letter-exchange", "orders.dlx"),
            text("x-dead-letter-routing-key", "orders.dlq"),
        ],
    ))
    .await
    .unwrap();
    declare_plain(ch, "orders.dlq").await;
    ch.bind_queue(&Binding::new("orders", "orders", "orders"))
        .await
        .unwrap();
    ch.bind_queue(&Binding::new("orders.dlq", "orders.dlx", "orders.dlq"))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_rejected_message_carries_x_death_with_rabbitmq_types() {
    let (_broker, ch) = setup().await;
    work_topology(&ch).await;
    ch.publish(Publication::new("orders", "orders", b"m", labelled("m")))
        .await
        .unwrap();
    let delivery = take(&ch, "orders").await;
    delivery.acker.reject().await.unwrap();

    let dead = take(&ch, "orders.dlq").await;
    assert_eq!(dead.exchange, "orders.dlx");
    assert_eq!(dead.routing_key, "orders.dlq");
    assert!(!dead.redelivered);
    assert_eq!(dead.data, b"m");
    assert_eq!(
        dead.properties.message_id().as_ref().map(|s| s.as_str()),
        Some("m")
    );
    let Some(AMQPValue::FieldArray(deaths)) = header(&dead.properties, "x-death") else {
        panic!("no x-death array: {:?}", dead.properties.headers());
    };
    assert_eq!(deaths.as_slice().len(), 1);
    let AMQPValue::FieldTable(entry) = &deaths.as_slice()[0] else {
        panic!("not a table");
    };
    let entry = entry.inner();
    assert_eq!(entry.get("count"), Some(&AMQPValue::LongLongInt(1)));
    assert_eq!(entry.get("reason"), Some(&longstr("rejected")));
    assert_eq!(entry.get("queue"), Some(&longstr("orders")));
    assert_eq!(entry.get("exchange"), Some(&longstr("orders")));
    assert_eq!(
        entry.get("routing-keys"),
        Some(&AMQPValue::FieldArray(FieldArray::from(vec![longstr(
            "orders"
        )])))
    );
    match entry.get("time") {
        Some(AMQPValue::Timestamp(t)) => assert!(t.abs_diff(unix_now()) <= 2, "time {t}"),
        other => panic!("time is {other:?}"),
    }
    assert!(!entry.contains_key("original-expiration"));
    assert_eq!(entry.len(), 6);
    for (name, value) in [
        ("x-first-death-reason", "rejected"),
        ("x-first-death-queue", "orders"),
        ("x-first-death-exchange", "orders"),
    ] {
        assert_eq!(
            header(&dead.properties, name),
            Some(&longstr(value)),
            "{name}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn dying_again_in_the_same_queue_for_the_same_reason_counts_up() {
    let (broker, ch) = setup_with(&["work"]).await;
    declare_dead_lettering(&ch, "bounce", "work", vec![int("x-message-ttl", 1_000)]).await;
    put(&ch, "bounce", "m").await;
    sleep(Duration::from_millis(1_500)).await;
    let first = broker.messages("work")[0].x_death();

    // Send it round again, headers and all, a few seconds later.
    sleep(Duration::from_secs(5)).await;
    let delivery = take(&ch, "work").await;
    ch.publish(Publication::new(
        "",
        "bounce",
        &delivery.data,
        delivery.properties.clone(),
    ))
    .await
    .unwrap();
    delivery.acker.ack().await.unwrap();
    sleep(Duration::from_millis(1_500)).await;

    let again = broker.messages("work");
    let deaths = again[0].x_death();
    assert_eq!(deaths.len(), 1);
    assert_eq!(deaths[0].count, 2);
    assert_eq!(deaths[0].reason, "expired");
    // RabbitMQ 3.10 keeps the entry's first time.
    assert_eq!(deaths[0].time, first[0].time);
    assert_eq!(again[0].header_str("x-first-death-queue"), Some("bounce"));
}

#[tokio::test(start_paused = true)]
async fn entries_are_newest_first_and_a_repeated_one_moves_to_the_front() {
    let (broker, ch) = setup_with(&["work"]).await;
    for q in ["a", "b", "c"] {
        declare_dead_lettering(&ch, q, "work", vec![int("x-message-ttl", 1_000)]).await;
    }
    put(&ch, "a", "m").await;
    let route = |via: &'static str| {
        let ch = Arc::clone(&ch);
        async move {
            sleep(Duration::from_millis(1_500)).await;
            let d = take(&ch, "work").await;
            ch.publish(Publication::new("", via, &d.data, d.properties.clone()))
                .await
                .unwrap();
            d.acker.ack().await.unwrap();
        }
    };
    route("b").await;
    sleep(Duration::from_millis(1_500)).await;
    let queues = |broker: &TestBroker| -> Vec<(String, i64)> {
        broker.messages("work")[0]
            .x_death()
            .into_iter()
            .map(|d| (d.queue, d.count))
            .collect()
    };
    assert_eq!(queues(&broker), [("b".into(), 1), ("a".into(), 1)]);

    route("a").await;
    sleep(Duration::from_millis(1_500)).await;
    // a again: its entry counts 2 and leads. (RabbitMQ regroups the others
    // in reverse order first: with one other entry, nothing shows.)
    assert_eq!(queues(&broker), [("a".into(), 2), ("b".into(), 1)]);

    route("c").await;
    sleep(Duration::from_millis(1_500)).await;
    // rabbit_dead_letter:group_by_queue_and_reason/1 folds by prepending,
    // so with two or more earlier entries they come out reversed.
    assert_eq!(
        queues(&broker),
        [("c".into(), 1), ("b".into(), 1), ("a".into(), 2)]
    );
    assert_eq!(
        broker.messages("work")[0].header_str("x-first-death-queue"),
        Some("a")
    );
}

#[tokio::test(start_paused = true)]
async fn drop_head_overflow_dead_letters_the_oldest_with_maxlen() {
    let (broker, ch) = setup_with(&["dlq"]).await;
    declare_dead_lettering(&ch, "q", "dlq", vec![int("x-max-length", 2)]).await;
    for m in ["m1", "m2", "m3"] {
        put(&ch, "q", m).await;
    }
    assert_eq!(labels(&broker, "q"), ["m2", "m3"]);
    let dead = broker.dead_letters("dlq");
    assert_eq!(labels(&broker, "dlq"), ["m1"]);
    assert_eq!(dead[0].x_death()[0].reason, "maxlen");
}

#[tokio::test(start_paused = true)]
async fn reject_publish_overflow_nacks_the_publisher() {
    let (broker, ch) = setup().await;
    ch.declare_queue(&decl(
        "q",
        vec![int("x-max-length", 1), text("x-overflow", "reject-publish")],
    ))
    .await
    .unwrap();
    declare_plain(&ch, "other").await;
    ch.declare_exchange("fan", ExchangeKind::Fanout)
        .await
        .unwrap();
    ch.bind_queue(&Binding::new("q", "fan", "")).await.unwrap();
    ch.bind_queue(&Binding::new("other", "fan", ""))
        .await
        .unwrap();

    let send = |label: &'static str| {
        let ch = Arc::clone(&ch);
        async move {
            ch.publish(Publication::new(
                "fan",
                "",
                label.as_bytes(),
                labelled(label),
            ))
            .await
            .unwrap()
        }
    };
    assert_eq!(send("m1").await, Confirm::Ack);
    // Full: refused by q (nack) though other took it.
    assert_eq!(send("m2").await, Confirm::Nack);
    assert_eq!(labels(&broker, "q"), ["m1"]);
    assert_eq!(labels(&broker, "other"), ["m1", "m2"]);
    ch.get("q")
        .await
        .unwrap()
        .unwrap()
        .acker
        .ack()
        .await
        .unwrap();
    assert_eq!(send("m3").await, Confirm::Ack);
}

#[tokio::test(start_paused = true)]
async fn a_quorum_queue_counts_deliveries_and_dead_letters_past_the_limit() {
    let (broker, ch) = setup_with(&["dlq"]).await;
    declare_dead_lettering(
        &ch,
        "qq",
        "dlq",
        vec![text("x-queue-type", "quorum"), int("x-delivery-limit", 2)],
    )
    .await;
    put(&ch, "qq", "m").await;
    let mut consumer = ch.consume("qq").await.unwrap();

    let mut counts = Vec::new();
    for _ in 0..3 {
        let d = next(&mut consumer).await;
        counts.push((
            d.redelivered,
            header(&d.properties, "x-delivery-count").cloned(),
        ));
        d.acker.requeue().await.unwrap();
    }
    assert_eq!(
        counts,
        [
            (false, None),
            (true, Some(AMQPValue::LongLongInt(1))),
            (true, Some(AMQPValue::LongLongInt(2))),
        ]
    );
    // The third return (count 3 > limit 2) dead-letters it.
    assert!(quiet_for(&mut consumer, Duration::from_secs(1)).await);
    let dead = broker.dead_letters("dlq");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].x_death()[0].reason, "delivery_limit");
    assert_eq!(dead[0].header("x-delivery-count"), None);
}

#[tokio::test(start_paused = true)]
async fn an_automatic_cycle_is_dropped_but_one_with_a_rejection_is_not() {
    let (broker, ch) = setup().await;
    // Expires into itself: the fresh x-death already names the queue it
    // would return to, so RabbitMQ drops it.
    declare_dead_lettering(&ch, "loop", "loop", vec![int("x-message-ttl", 1_000)]).await;
    put(&ch, "loop", "m").await;
    sleep(Duration::from_millis(1_500)).await;
    assert_eq!(broker.queue_depth("loop"), 0);

    // Rejected into itself: a client decided, so it goes round.
    declare_dead_lettering(&ch, "self", "self", vec![]).await;
    put(&ch, "self", "r").await;
    reject_next(&ch, "self").await;
    let back = broker.messages("self");
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].x_death()[0].reason, "rejected");
}

#[tokio::test(start_paused = true)]
async fn a_missing_dead_letter_exchange_or_none_drops_the_message() {
    let (broker, ch) = setup().await;
    ch.declare_queue(&decl("q", vec![text("x-dead-letter-exchange", "nowhere")]))
        .await
        .unwrap();
    declare_plain(&ch, "plain").await;
    put(&ch, "q", "a").await;
    put(&ch, "plain", "b").await;
    reject_next(&ch, "q").await;
    reject_next(&ch, "plain").await;
    assert_eq!(broker.queue_depth("q"), 0);
    assert_eq!(broker.queue_depth("plain"), 0);
}

#[tokio::test(start_paused = true)]
async fn without_a_dead_letter_routing_key_the_message_keeps_its_own() {
    let (broker, ch) = setup().await;
    ch.declare_exchange("dlx", ExchangeKind::Topic)
        .await
        .unwrap();
    declare_plain(&ch, "caught").await;
    ch.bind_queue(&Binding::new("caught", "dlx", "orders.#"))
        .await
        .unwrap();
    ch.declare_exchange("in", ExchangeKind::Topic)
        .await
        .unwrap();
    ch.declare_queue(&decl("q", vec![text("x-dead-letter-exchange", "dlx")]))
        .await
        .unwrap();
    ch.bind_queue(&Binding::new("q", "in", "#")).await.unwrap();
    ch.publish(Publication::new(
        "in",
        "orders.created",
        b"m",
        labelled("m"),
    ))
    .await
    .unwrap();
    reject_next(&ch, "q").await;

    let caught = broker.messages("caught");
    assert_eq!(caught.len(), 1);
    assert_eq!(caught[0].routing_key(), "orders.created");
    assert_eq!(caught[0].exchange(), "dlx");
    assert_eq!(caught[0].x_death()[0].exchange, "in");
}
