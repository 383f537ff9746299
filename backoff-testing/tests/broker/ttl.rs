//! Message TTL: measured from enqueue, expiring only at the head, by the
//! clock (nobody polls), and whole retry schedules under paused time.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use tokio::time::{Instant, sleep};

use super::*;

#[tokio::test(start_paused = true)]
async fn a_long_ttl_at_the_head_blocks_a_short_one_behind_it() {
    let (broker, ch) = setup_with(&["expired"]).await;
    declare_dead_lettering(&ch, "mixed", "expired", vec![]).await;
    let with_ttl = |label: &str, ms: &str| labelled(label).with_expiration(ShortString::from(ms));
    ch.publish(Publication::new(
        "",
        "mixed",
        b"10s",
        with_ttl("10s", "10000"),
    ))
    .await
    .unwrap();
    ch.publish(Publication::new("", "mixed", b"1s", with_ttl("1s", "1000")))
        .await
        .unwrap();

    sleep(Duration::from_millis(9_900)).await;
    // The 1 s message expired long ago, but waits behind the 10 s one.
    assert!(labels(&broker, "expired").is_empty());
    assert_eq!(broker.unacked_count("mixed"), 0);
    sleep(Duration::from_millis(200)).await;
    assert_eq!(labels(&broker, "expired"), ["10s", "1s"]);
}

#[tokio::test(start_paused = true)]
async fn messages_expire_by_the_clock_without_anyone_polling() {
    let (_broker, ch) = setup_with(&["work"]).await;
    declare_dead_lettering(&ch, "retry", "work", vec![int("x-message-ttl", 5_000)]).await;
    let mut consumer = ch.consume("work").await.unwrap();
    let started = Instant::now();
    put(&ch, "retry", "m").await;

    let delivery = next(&mut consumer).await;
    let waited = started.elapsed();
    assert_eq!(label(&delivery), "m");
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_millis(5_010),
        "delivered after {waited:?}"
    );
    assert_eq!(delivery.exchange, "");
    assert_eq!(delivery.routing_key, "work");
}

#[tokio::test(start_paused = true)]
async fn ttl_is_measured_from_enqueue() {
    let (broker, ch) = setup_with(&["dlq"]).await;
    declare_dead_lettering(&ch, "q", "dlq", vec![int("x-message-ttl", 5_000)]).await;
    put(&ch, "q", "first").await;
    sleep(Duration::from_secs(3)).await;
    put(&ch, "q", "second").await;

    sleep(Duration::from_millis(4_900)).await; // t = 7.9 s
    assert_eq!(labels(&broker, "dlq"), ["first"]);
    assert_eq!(labels(&broker, "q"), ["second"]);
    sleep(Duration::from_millis(200)).await; // t = 8.1 s
    assert_eq!(labels(&broker, "dlq"), ["first", "second"]);
}

#[tokio::test(start_paused = true)]
async fn an_expired_message_without_a_dead_letter_exchange_is_dropped() {
    let (broker, ch) = setup().await;
    ch.declare_queue(&decl("q", vec![int("x-message-ttl", 1_000)]))
        .await
        .unwrap();
    put(&ch, "q", "m").await;
    assert_eq!(ch.check_queue("q").await.unwrap().messages, 1);
    sleep(Duration::from_secs(2)).await;
    assert_eq!(ch.check_queue("q").await.unwrap().messages, 0);
    assert_eq!(broker.queue_depth("q"), 0);
}

#[tokio::test(start_paused = true)]
async fn get_expires_the_head_first() {
    let (broker, ch) = setup_with(&["dlq"]).await;
    declare_dead_lettering(&ch, "q", "dlq", vec![int("x-message-ttl", 1_000)]).await;
    put(&ch, "q", "m").await;
    sleep(Duration::from_millis(1_500)).await;
    assert!(ch.get("q").await.unwrap().is_none());
    assert_eq!(labels(&broker, "dlq"), ["m"]);
}

#[tokio::test(start_paused = true)]
async fn a_per_message_ttl_is_kept_as_original_expiration_and_removed() {
    let (broker, ch) = setup_with(&["dlq"]).await;
    // The queue's TTL is longer: the message's own applies.
    declare_dead_lettering(&ch, "q", "dlq", vec![int("x-message-ttl", 60_000)]).await;
    ch.publish(Publication::new(
        "",
        "q",
        b"m",
        labelled("m").with_expiration(ShortString::from("1000")),
    ))
    .await
    .unwrap();
    sleep(Duration::from_millis(1_001)).await;

    let dead = broker.dead_letters("dlq");
    assert_eq!(dead.len(), 1);
    assert_eq!(*dead[0].properties().expiration(), None);
    let death = &dead[0].x_death()[0];
    assert_eq!(death.original_expiration.as_deref(), Some("1000"));
    assert_eq!(death.reason, "expired");
}

/// A consumer in the framework's style: reads `x-retry-count`, republishes
/// to the next retry queue with the count incremented, acks; dead-letters
/// once the schedule is exhausted.
async fn retrying_consumer(
    channel: Arc<dyn Channel>,
    mut deliveries: Deliveries,
    delays: &'static [u64],
) {
    while let Some(Ok(delivery)) = deliveries.stream.next().await {
        let count = match header(&delivery.properties, "x-retry-count") {
            Some(AMQPValue::LongLongInt(n)) => *n as u32,
            _ => 0,
        };
        let (target, count) = match delays.get(count as usize) {
            Some(ms) => (format!("orders.retry_{ms}ms"), count + 1),
            None => ("orders.dlq".to_owned(), count),
        };
        let mut headers = delivery.properties.headers().clone().unwrap_or_default();
        headers.insert(
            "x-retry-count".into(),
            AMQPValue::LongLongInt(i64::from(count)),
        );
        let properties = delivery.properties.clone().with_headers(headers);
        channel
            .publish(Publication::new("", &target, &delivery.data, properties))
            .await
            .unwrap();
        delivery.acker.ack().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn run_until_idle_plays_a_5s_15s_60s_schedule_in_milliseconds() {
    const DELAYS: &[u64] = &[5_000, 15_000, 60_000];
    let (broker, ch) = setup_with(&["orders"]).await;
    declare_plain(&ch, "orders.dlq").await;
    for ms in DELAYS {
        let name = format!("orders.retry_{ms}ms");
        declare_dead_lettering(&ch, &name, "orders", vec![int("x-message-ttl", *ms as i64)]).await;
    }
    let deliveries = ch.consume("orders").await.unwrap();
    tokio::spawn(retrying_consumer(Arc::clone(&ch), deliveries, DELAYS));

    let mut headers = FieldTable::default();
    headers.insert(
        "trace".into(),
        AMQPValue::LongString(LongString::from("t-1")),
    );
    ch.publish(Publication::new(
        "",
        "orders",
        b"{}",
        BasicProperties::default().with_headers(headers),
    ))
    .await
    .unwrap();

    let wall = std::time::Instant::now();
    let virtual_start = Instant::now();
    broker
        .run_until_idle_within(Duration::from_secs(3_600))
        .await
        .unwrap();
    let virtual_elapsed = virtual_start.elapsed();
    assert!(
        wall.elapsed() < Duration::from_secs(2),
        "took {:?} of wall time",
        wall.elapsed()
    );
    assert!(
        virtual_elapsed >= Duration::from_secs(80) && virtual_elapsed < Duration::from_secs(82),
        "{virtual_elapsed:?} of virtual time"
    );
    let dead = broker.dead_letters("orders.dlq");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].retry_count(), 3);
    assert_eq!(dead[0].header_str("trace"), Some("t-1"));
    let mut deaths: Vec<(String, i64)> = dead[0]
        .x_death()
        .into_iter()
        .map(|d| (d.queue, d.count))
        .collect();
    deaths.sort();
    assert_eq!(
        deaths,
        [
            ("orders.retry_15000ms".to_owned(), 1),
            ("orders.retry_5000ms".to_owned(), 1),
            ("orders.retry_60000ms".to_owned(), 1)
        ]
    );
    for queue in [
        "orders",
        "orders.retry_5000ms",
        "orders.retry_15000ms",
        "orders.retry_60000ms",
    ] {
        assert_eq!(broker.queue_depth(queue), 0, "{queue}");
        assert_eq!(broker.unacked_count(queue), 0, "{queue}");
    }
}

#[tokio::test(start_paused = true)]
async fn run_until_idle_gives_up_on_a_consumer_that_never_settles() {
    let (broker, ch) = setup_with(&["q"]).await;
    let mut consumer = ch.consume("q").await.unwrap();
    put(&ch, "q", "stuck").await;
    let _held = next(&mut consumer).await;

    let wall = std::time::Instant::now();
    let busy = broker
        .run_until_idle_within(Duration::from_secs(600))
        .await
        .unwrap_err();
    assert!(wall.elapsed() < Duration::from_secs(2));
    assert!(busy.waited >= Duration::from_secs(600));
    assert_eq!(busy.queues.len(), 1);
    assert_eq!(busy.queues[0].queue, "q");
    assert_eq!(busy.queues[0].unacked, 1);
    assert!(busy.to_string().contains("1 unacked"));
}
