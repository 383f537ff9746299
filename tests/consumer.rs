//! The per-message semantics against the real broker: ack, retry tiers,
//! dead letters and what they carry.

mod common;

use std::time::{Duration, Instant};

use common::*;
use lapin::BasicProperties;
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable};

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test]
async fn success_is_acked_once() {
    let running = Running::start("success", |_| {}).await;
    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(1, Fail::None, None))
        .await;
    eventually("the job to be handled", WAIT, || {
        running.journal.calls_for(1).len() == 1
    })
    .await;

    let (_c, channel) = channel().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        running.journal.calls_for(1).len(),
        1,
        "handled exactly once"
    );
    assert_eq!(depth(&channel, &running.spec.queue).await, 0);
    assert_eq!(
        depth(&channel, &running.spec.names().dead_letter_queue).await,
        0
    );
    running.stop().await;
}

#[tokio::test]
async fn transient_failure_retries_through_the_tiers_then_succeeds() {
    let running = Running::start("transient", |_| {}).await;
    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(2, Fail::Transient, Some(2)))
        .await;
    eventually("three attempts", WAIT, || {
        running.journal.calls_for(2).len() == 3
    })
    .await;

    let calls = running.journal.calls_for(2);
    let counts: Vec<u32> = calls.iter().map(|s| s.retry_count).collect();
    assert_eq!(counts, [0, 1, 2], "each attempt carries x-retry-count + 1");
    // Tier 0 waits 100 ms, tier 1 waits 200 ms.
    assert!(
        calls[1].at - calls[0].at >= Duration::from_millis(100),
        "first retry waited its delay"
    );
    assert!(
        calls[2].at - calls[1].at >= Duration::from_millis(200),
        "second retry waited its delay"
    );

    let (_c, channel) = channel().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        running.journal.calls_for(2).len(),
        3,
        "no attempt after success"
    );
    assert_eq!(
        depth(&channel, &running.spec.names().dead_letter_queue).await,
        0
    );
    running.stop().await;
}

#[tokio::test]
async fn exhausted_messages_are_dead_lettered_with_their_story() {
    let running = Running::start("exhausted", |_| {}).await;
    let publisher = publisher().await;
    let started = Instant::now();
    running
        .publish(&publisher, &Job::new(3, Fail::Transient, None))
        .await;

    let (_c, channel) = channel().await;
    let dead = next_message(&channel, &running.spec.names().dead_letter_queue, WAIT).await;
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "waited 100 + 200 + 300 ms first"
    );
    let p = &dead.delivery.properties;
    assert_eq!(
        header_int(p, "x-retry-count"),
        Some(3),
        "count = number of tiers"
    );
    assert_eq!(
        header_str(p, "x-dead-letter-reason").as_deref(),
        Some("exhausted")
    );
    assert_eq!(
        header_str(p, "x-error").as_deref(),
        Some("dependency unavailable (job 3)")
    );
    let failed_at = header_str(p, "x-failed-at").expect("x-failed-at");
    humantime::parse_rfc3339(&failed_at)
        .unwrap_or_else(|e| panic!("{failed_at} is not RFC 3339: {e}"));
    assert!(failed_at.ends_with('Z'), "UTC: {failed_at}");
    assert_eq!(
        header_str(p, "x-original-queue").as_deref(),
        Some(running.spec.queue.as_str())
    );
    let body: Job = serde_json::from_slice(&dead.delivery.data).expect("the body is kept");
    assert_eq!(body.id, 3);
    assert_eq!(
        running.journal.calls_for(3).len(),
        4,
        "first attempt plus one per tier"
    );
    running.stop().await;
}

#[tokio::test]
async fn permanent_failures_skip_the_tiers() {
    let running = Running::start("permanent", |_| {}).await;
    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(4, Fail::Permanent, None))
        .await;

    let (_c, channel) = channel().await;
    let dead = next_message(&channel, &running.spec.names().dead_letter_queue, WAIT).await;
    let p = &dead.delivery.properties;
    assert_eq!(header_int(p, "x-retry-count"), Some(0));
    assert_eq!(
        header_str(p, "x-dead-letter-reason").as_deref(),
        Some("permanent")
    );
    assert_eq!(
        header_str(p, "x-error").as_deref(),
        Some("job 4 is invalid")
    );
    assert_eq!(running.journal.calls_for(4).len(), 1);
    for q in &rabbit_backoff::Topology::of(&running.spec).retry_queues {
        assert_eq!(
            depth(&channel, &q.name).await,
            0,
            "nothing waits in {}",
            q.name
        );
    }
    running.stop().await;
}

#[tokio::test]
async fn undecodable_bodies_are_dead_lettered_with_the_reason() {
    let running = Running::start("decode", |_| {}).await;
    let publisher = publisher().await;
    let names = running.spec.names();
    for body in [
        &b"not json"[..],
        b"",
        b"{\"id\": \"seven\"}",
        &[0xff, 0xfe, 0x00],
    ] {
        publisher
            .publish(
                &names.exchange,
                &names.routing_key,
                rabbit_backoff::Outgoing::raw(body.to_vec()),
            )
            .await
            .expect("publish");
    }
    let (_c, channel) = channel().await;
    for _ in 0..4 {
        let dead = next_message(&channel, &names.dead_letter_queue, WAIT).await;
        let p = &dead.delivery.properties;
        assert_eq!(
            header_str(p, "x-dead-letter-reason").as_deref(),
            Some("decode")
        );
        assert_eq!(header_int(p, "x-retry-count"), Some(0));
        let error = header_str(p, "x-error").unwrap();
        assert!(
            error.starts_with("cannot decode the body as JSON"),
            "{error}"
        );
    }
    assert!(
        running.journal.calls().is_empty(),
        "the handler never saw them"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_panicking_handler_is_retried_and_the_consumer_keeps_running() {
    let running = Running::start("panic", |_| {}).await;
    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(5, Fail::Panic, Some(1)))
        .await;
    eventually("the retry after the panic", WAIT, || {
        running.journal.calls_for(5).len() == 2
    })
    .await;
    running
        .publish(&publisher, &Job::new(6, Fail::None, None))
        .await;
    eventually("a later job", WAIT, || {
        running.journal.calls_for(6).len() == 1
    })
    .await;
    assert!(!running.task.is_finished());
    running.stop().await;
}

#[tokio::test]
async fn identity_and_headers_survive_every_hop() {
    let running = Running::start("props", |_| {}).await;
    let names = running.spec.names();
    let (_c, channel) = channel().await;
    channel.confirm_select(Default::default()).await.unwrap();
    let mut headers = FieldTable::default();
    headers.insert("tenant".into(), AMQPValue::LongString("acme".into()));
    let body = serde_json::to_vec(&Job::new(7, Fail::Transient, None)).unwrap();
    channel
        .basic_publish(
            names.exchange.as_str().into(),
            names.routing_key.as_str().into(),
            BasicPublishOptions::default(),
            &body,
            BasicProperties::default()
                .with_message_id("msg-7".into())
                .with_correlation_id("corr-7".into())
                .with_content_type("application/json".into())
                .with_app_id("tests".into())
                .with_headers(headers),
        )
        .await
        .unwrap()
        .await
        .unwrap();

    let dead = next_message(&channel, &names.dead_letter_queue, WAIT).await;
    let calls = running.journal.calls_for(7);
    assert_eq!(calls.len(), 4);
    for seen in &calls {
        assert_eq!(
            seen.message_id.as_deref(),
            Some("msg-7"),
            "attempt {}",
            seen.retry_count
        );
        assert_eq!(seen.correlation_id.as_deref(), Some("corr-7"));
        assert_eq!(seen.content_type.as_deref(), Some("application/json"));
        assert_eq!(seen.tenant.as_deref(), Some("acme"));
    }
    let p = &dead.delivery.properties;
    assert_eq!(p.message_id().as_ref().map(|s| s.as_str()), Some("msg-7"));
    assert_eq!(
        p.correlation_id().as_ref().map(|s| s.as_str()),
        Some("corr-7")
    );
    assert_eq!(p.app_id().as_ref().map(|s| s.as_str()), Some("tests"));
    assert_eq!(p.delivery_mode(), &Some(2), "persistent");
    assert_eq!(header_str(p, "tenant").as_deref(), Some("acme"));
    running.stop().await;
}

#[tokio::test]
async fn many_messages_with_mixed_outcomes_are_all_accounted_for() {
    let running = Running::start("mixed", |spec| spec.prefetch = 20).await;
    let publisher = publisher().await;
    let fails = [
        Fail::None,
        Fail::Transient,
        Fail::Permanent,
        Fail::None,
        Fail::Panic,
    ];
    for id in 0..100u64 {
        let fail = fails[id as usize % fails.len()];
        running
            .publish(
                &publisher,
                &Job {
                    id,
                    fail,
                    attempts: Some(1),
                },
            )
            .await;
    }
    // Successes: None (40) + Transient/Panic after one retry (40); permanent (20) dead-lettered.
    let (_c, channel) = channel().await;
    let dlq = running.spec.names().dead_letter_queue;
    eventually("every message settled", WAIT, || {
        let calls = running.journal.calls();
        calls.len() == 40 + 80 + 20
    })
    .await;
    let mut dead = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let message = next_message(&channel, &dlq, WAIT).await;
        let job: Job = serde_json::from_slice(&message.delivery.data).unwrap();
        assert_eq!(job.fail, Fail::Permanent);
        dead.insert(job.id);
    }
    assert_eq!(dead.len(), 20);
    assert_eq!(depth(&channel, &dlq).await, 0);
    running.stop().await;
}

#[tokio::test]
async fn a_handler_can_be_unit_tested_without_a_broker() {
    use rabbit_backoff::prelude::*;
    let journal = Journal::default();
    let ctx = Context::builder("orders")
        .retry_count(1)
        .message_id("m-9")
        .header("tenant", "acme")
        .state(journal.clone())
        .build();
    let result = process_job
        .handle(Job::new(9, Fail::Transient, Some(1)), &ctx)
        .await;
    assert!(
        result.is_ok(),
        "succeeds once the retry count reaches `attempts`"
    );
    let failed = process_job
        .handle(Job::new(10, Fail::Permanent, None), &ctx)
        .await;
    assert_eq!(
        failed.err().map(|e| e.classify()),
        Some(rabbit_backoff::ErrorClass::Permanent)
    );
    let seen = journal.calls_for(9);
    assert_eq!(
        (
            seen[0].retry_count,
            seen[0].message_id.as_deref(),
            seen[0].tenant.as_deref()
        ),
        (1, Some("m-9"), Some("acme"))
    );
}

#[tokio::test]
async fn a_hung_handler_times_out_and_is_retried() {
    let running = Running::start("timeout", |spec| {
        spec.handler_timeout = Some(Duration::from_millis(300))
    })
    .await;
    let publisher = publisher().await;
    let started = Instant::now();
    running
        .publish(&publisher, &Job::new(11, Fail::Hang, Some(1)))
        .await;
    eventually("the retry after the timeout", WAIT, || {
        running.journal.calls_for(11).len() == 2
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "abandoned after 300 ms, not after 10 s"
    );
    let calls = running.journal.calls_for(11);
    assert!(
        calls[1].at - calls[0].at >= Duration::from_millis(300 + 100),
        "timeout, then the first tier's delay"
    );
    let (_c, channel) = channel().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        depth(&channel, &running.spec.names().dead_letter_queue).await,
        0
    );
    assert_eq!(depth(&channel, &running.spec.queue).await, 0, "settled");
    running.stop().await;
}
