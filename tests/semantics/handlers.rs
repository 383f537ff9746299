//! Handlers that panic, hang, or run many at once with mixed outcomes.

use super::*;

pub(super) async fn a_panicking_handler_is_retried_and_the_consumer_keeps_running(
    backend: Backend,
) {
    let h = Harness::start(&backend, "sem-panic", |_| {}).await;
    h.publish(&Job::new(5, Fail::Panic, Some(1)), props()).await;
    eventually("the retry after the panic", WAIT, || {
        h.journal.calls_for(5).len() == 2
    })
    .await;
    h.publish(&Job::new(6, Fail::None, None), props()).await;
    eventually("a later job", WAIT, || h.journal.calls_for(6).len() == 1).await;
    h.stop().await;
}

pub(super) async fn a_hung_handler_times_out_and_is_retried(backend: Backend) {
    let mut h = Harness::start(&backend, "sem-timeout", |spec| {
        spec.handler_timeout = Some(Duration::from_millis(300));
    })
    .await;
    h.publish(&Job::new(11, Fail::Hang, Some(1)), props()).await;
    eventually("the retry after the timeout", WAIT, || {
        h.journal.calls_for(11).len() == 2
    })
    .await;
    let calls = h.journal.calls_for(11);
    let waited = calls[1].at - calls[0].at;
    assert!(
        waited >= Duration::from_millis(300 + 100) && waited < Duration::from_secs(5),
        "abandoned after 300 ms, then the first tier's delay; not after the handler's 10 s: {waited:?}"
    );
    h.stop_consumer().await;
    assert_eq!(h.depth(&h.spec.names().dead_letter_queue).await, 0);
    assert_eq!(h.depth(&h.spec.queue).await, 0, "settled");
    h.stop().await;
}

pub(super) async fn many_messages_with_mixed_outcomes_are_all_accounted_for(backend: Backend) {
    let h = Harness::start(&backend, "sem-mixed", |spec| spec.prefetch = 20).await;
    let fails = [
        Fail::None,
        Fail::Transient,
        Fail::Permanent,
        Fail::None,
        Fail::Panic,
    ];
    for id in 0..100u64 {
        let fail = fails[id as usize % fails.len()];
        h.publish(&Job::new(id, fail, Some(1)), props()).await;
    }
    // None (40) once, Transient and Panic (40) twice, Permanent (20) once.
    eventually("every message handled", WAIT, || {
        h.journal.calls().len() == 40 + 80 + 20
    })
    .await;
    let mut dead = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let message = h.next_dead_letter().await;
        let job: Job = serde_json::from_slice(&message.data).unwrap();
        assert_eq!(job.fail, Fail::Permanent);
        dead.insert(job.id);
    }
    assert_eq!(dead.len(), 20);
    assert_eq!(h.depth(&h.spec.names().dead_letter_queue).await, 0);
    h.stop().await;
}
