//! What becomes of one message: acked, retried tier by tier, dead-lettered
//! with its story and its origin.

use super::*;

pub(super) async fn success_is_acked_once(backend: Backend) {
    let mut h = Harness::start(&backend, "sem-success", |_| {}).await;
    h.publish(&Job::new(1, Fail::None, None), props()).await;
    eventually("the job", WAIT, || !h.journal.calls_for(1).is_empty()).await;
    // Stopping returns anything unacked to the queue: nothing is there.
    h.stop_consumer().await;
    assert_eq!(h.depth(&h.spec.queue).await, 0, "acked");
    assert_eq!(h.depth(&h.spec.names().dead_letter_queue).await, 0);
    assert_eq!(h.journal.calls_for(1).len(), 1, "handled exactly once");
    h.stop().await;
}

pub(super) async fn each_tier_in_turn_then_success(backend: Backend) {
    let h = Harness::start(&backend, "sem-tiers", |_| {}).await;
    h.publish(&Job::new(1, Fail::Transient, Some(3)), props())
        .await;
    eventually("attempt 4", WAIT, || h.journal.reached(1, 3)).await;
    let calls = h.journal.calls_for(1);
    let counts: Vec<u32> = calls.iter().map(|s| s.retry_count).collect();
    assert_eq!(counts, [0, 1, 2, 3]);
    for (gap, delay) in calls.windows(2).zip([100u64, 200, 300]) {
        let waited = gap[1].at.duration_since(gap[0].at);
        assert!(
            waited >= Duration::from_millis(delay),
            "tier {delay}ms waited {waited:?}"
        );
    }
    h.stop().await;
}

pub(super) async fn exhausted_messages_carry_their_story(backend: Backend) {
    let h = Harness::start(&backend, "sem-exhausted", |_| {}).await;
    h.publish(&Job::new(7, Fail::Transient, None), props())
        .await;
    let dead = h.next_dead_letter().await;
    let p = &dead.properties;
    assert_eq!(header_int(p, "x-retry-count"), Some(3));
    assert_eq!(
        header_str(p, "x-dead-letter-reason").as_deref(),
        Some("exhausted")
    );
    assert_eq!(
        header_str(p, "x-error").as_deref(),
        Some("dependency unavailable (job 7)")
    );
    assert_eq!(
        header_str(p, "x-original-queue").as_deref(),
        Some(h.spec.queue.as_str())
    );
    let failed_at = header_str(p, "x-failed-at").expect("x-failed-at");
    assert!(failed_at.ends_with('Z'), "{failed_at}");
    assert_eq!(h.journal.calls_for(7).len(), 4);
    h.stop().await;
}

pub(super) async fn permanent_failures_skip_the_tiers(backend: Backend) {
    let h = Harness::start(&backend, "sem-permanent", |_| {}).await;
    h.publish(&Job::new(3, Fail::Permanent, None), props())
        .await;
    let dead = h.next_dead_letter().await;
    assert_eq!(
        header_str(&dead.properties, "x-dead-letter-reason").as_deref(),
        Some("permanent")
    );
    // No retry tier: a count of 0, written (the article's contract).
    assert_eq!(header_int(&dead.properties, "x-retry-count"), Some(0));
    assert_eq!(h.journal.calls_for(3).len(), 1);
    h.stop().await;
}

/// A dead letter names where it came from, leaving out what its
/// `x-original-queue` already says: through the work exchange (named after
/// the queue) with the queue's name as routing key, neither
/// `x-original-exchange` nor `x-original-routing-key`; through the default
/// exchange, `x-original-exchange` of `""`. Neither went through a retry
/// tier: an `x-retry-count` of 0, written all the same (the article's
/// contract; only the framework's own headers leave out what they imply).
pub(super) async fn dead_letters_name_their_origin_where_the_queue_does_not(backend: Backend) {
    let h = Harness::start(&backend, "sem-origin", |_| {}).await;
    let queue = h.spec.queue.clone();
    h.publish(&Job::new(1, Fail::Permanent, None), props())
        .await;
    let body = serde_json::to_vec(&Job::new(2, Fail::Permanent, None)).unwrap();
    h.on.publish_via("", &queue, &body, props()).await;
    let mut dead = BTreeMap::new();
    for _ in 0..2 {
        let d = h.next_dead_letter().await;
        let job: Job = serde_json::from_slice(&d.data).unwrap();
        dead.insert(job.id, d.properties);
    }
    let origin = |p: &BasicProperties| {
        (
            header_str(p, "x-original-queue"),
            header(p, "x-original-exchange").map(|_| header_str(p, "x-original-exchange")),
            header(p, "x-original-routing-key").is_some(),
        )
    };
    assert_eq!(origin(&dead[&1]), (Some(queue.clone()), None, false));
    assert_eq!(
        origin(&dead[&2]),
        (Some(queue.clone()), Some(Some(String::new())), false)
    );
    for p in dead.values() {
        assert_eq!(header_int(p, "x-retry-count"), Some(0));
    }
    h.stop().await;
}

pub(super) async fn undecodable_bodies_are_dead_lettered(backend: Backend) {
    let h = Harness::start(&backend, "sem-decode", |_| {}).await;
    h.publish_raw(b"not json", props()).await;
    let dead = h.next_dead_letter().await;
    assert_eq!(
        header_str(&dead.properties, "x-dead-letter-reason").as_deref(),
        Some("decode")
    );
    assert_eq!(dead.data, b"not json");
    assert!(h.journal.calls().is_empty());
    h.stop().await;
}
