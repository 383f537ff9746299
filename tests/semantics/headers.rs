//! The headers a message carries through its hops: the retry count read
//! tolerantly and never from `x-death`, identity and headers kept.

use super::*;

pub(super) async fn odd_retry_counts_are_read_tolerantly(backend: Backend) {
    let h = Harness::start(&backend, "sem-counts", |_| {}).await;
    let cases = [
        (1, AMQPValue::LongString("2".into()), 2),
        (2, AMQPValue::ShortShortUInt(1), 1),
        (3, AMQPValue::Double(1.5), 0),
        (4, AMQPValue::LongLongInt(-3), 0),
    ];
    for (id, value, _) in &cases {
        h.publish(
            &Job::new(*id, Fail::None, None),
            with_header("x-retry-count", value.clone()),
        )
        .await;
    }
    eventually("every job", WAIT, || {
        (1..=4).all(|id| !h.journal.calls_for(id).is_empty())
    })
    .await;
    for (id, _, expected) in cases {
        assert_eq!(h.journal.calls_for(id)[0].retry_count, expected, "job {id}");
    }
    h.stop().await;
}

/// The retry count is the framework's own `x-retry-count`, never read from
/// `x-death`: RabbitMQ 4.x no longer interprets `x-death` when a client
/// republishes a message, and a forged or copied one must not change how
/// many tiers a message gets.
pub(super) async fn the_retry_count_ignores_x_death(backend: Backend) {
    let h = Harness::start(&backend, "sem-xdeath", |_| {}).await;
    let tier = Topology::of(&h.spec).retry_queues[0].name.clone();
    let mut death = FieldTable::default();
    death.insert("count".into(), AMQPValue::LongLongInt(7));
    death.insert("reason".into(), AMQPValue::LongString("expired".into()));
    death.insert("queue".into(), AMQPValue::LongString(tier.as_str().into()));
    death.insert("exchange".into(), AMQPValue::LongString("".into()));
    let forged = AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into());
    // No x-retry-count beside it: the first attempt.
    h.publish(
        &Job::new(1, Fail::Transient, Some(1)),
        with_header("x-death", forged.clone()),
    )
    .await;
    // An x-retry-count beside it: that count, whatever x-death says.
    let mut both = FieldTable::default();
    both.insert("x-death".into(), forged);
    both.insert("x-retry-count".into(), AMQPValue::LongLongInt(2));
    h.publish(
        &Job::new(2, Fail::Transient, Some(3)),
        props().with_headers(both),
    )
    .await;
    eventually("both retried to success", WAIT, || {
        h.journal.reached(1, 1) && h.journal.reached(2, 3)
    })
    .await;
    let counts = |id| h.journal.retry_counts(id);
    assert_eq!(
        counts(1),
        [0, 1],
        "x-death's count of 7 is not a retry count"
    );
    assert_eq!(counts(2), [2, 3]);
    assert_eq!(h.depth(&h.spec.names().dead_letter_queue).await, 0);
    h.stop().await;
}

pub(super) async fn identity_and_headers_survive_every_hop(backend: Backend) {
    let h = Harness::start(&backend, "sem-identity", |_| {}).await;
    let properties = with_header("tenant", AMQPValue::LongString("acme".into()))
        .with_message_id("m-1".into())
        .with_correlation_id("c-1".into())
        .with_content_type("application/json".into())
        .with_priority(3);
    h.publish(&Job::new(1, Fail::Transient, None), properties)
        .await;
    let dead = h.next_dead_letter().await;
    for seen in h.journal.calls_for(1) {
        assert_eq!(seen.message_id.as_deref(), Some("m-1"));
        assert_eq!(seen.correlation_id.as_deref(), Some("c-1"));
        assert_eq!(seen.tenant.as_deref(), Some("acme"));
    }
    let p = &dead.properties;
    assert_eq!(p.message_id().as_ref().map(|s| s.as_str()), Some("m-1"));
    assert_eq!(p.priority(), &Some(3));
    assert_eq!(p.delivery_mode(), &Some(2));
    assert_eq!(header_str(p, "tenant").as_deref(), Some("acme"));
    h.stop().await;
}
