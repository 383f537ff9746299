//! A retry copy the broker does not take (nacked, unroutable): the original
//! is kept.

use super::*;

/// A copy the broker does not take (`how` breaks the first retry tier) is
/// never acked: the original is requeued, after a pause, and nothing is lost.
async fn a_copy_the_broker_does_not_take_keeps_the_original(
    backend: Backend,
    name: &str,
    how: impl FnOnce(&mut Topology),
) {
    let queue = unique(name);
    let mut spec = process_job.spec();
    spec.queue = queue.clone();
    // A classic retry queue refuses the copy at once (`how`); a quorum one
    // applies a length limit only after the fact.
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    let mut topology = Topology::of(&spec);
    how(&mut topology);
    let _cleanup = backend.shared.then(|| Cleanup::of(&spec));
    declare_as_operator(&backend, &topology).await;
    let mut h = Harness::start(&backend, name, |s| {
        s.queue = queue.clone();
        s.queue_type = Some(rabbit_backoff::QueueType::Classic);
        s.declare = rabbit_backoff::DeclareMode::Passive;
    })
    .await;
    h.publish(&Job::new(1, Fail::Transient, None), props())
        .await;
    eventually("a second attempt after the requeue", WAIT, || {
        h.journal.calls_for(1).len() >= 2
    })
    .await;
    h.stop_consumer().await;
    let calls = h.journal.calls_for(1);
    assert!(
        calls.iter().all(|s| s.retry_count == 0),
        "never moved on: {:?}",
        calls.len()
    );
    assert!(
        calls[1].at - calls[0].at >= Duration::from_secs(1),
        "requeued after a pause, not in a hot loop"
    );
    // A delivery still unacked when the channel closed is requeued by the
    // queue after the close, not before the close's answer.
    eventually_async("the original back in its queue", WAIT, || async {
        h.depth(&queue).await == 1
    })
    .await;
    assert_eq!(h.depth(&topology.retry_queues[0].name).await, 0);
    assert_eq!(h.depth(&topology.dead_letter_queue.name).await, 0);
    h.stop().await;
}

pub(super) async fn a_nacked_retry_copy_keeps_the_original(backend: Backend) {
    a_copy_the_broker_does_not_take_keeps_the_original(backend, "sem-nacked", |t| {
        use rabbit_backoff::topology::Argument;
        let args = &mut t.retry_queues[0].arguments;
        args.push(("x-max-length".into(), Argument::Int(0)));
        args.push(("x-overflow".into(), Argument::Str("reject-publish".into())));
    })
    .await
}

pub(super) async fn an_unroutable_retry_copy_keeps_the_original(backend: Backend) {
    a_copy_the_broker_does_not_take_keeps_the_original(backend, "sem-unroutable", |t| {
        let first = t.retry_queues[0].name.clone();
        t.bindings.retain(|b| b.queue != first);
    })
    .await
}
