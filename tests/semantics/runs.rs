//! A run of many messages: the order of dead-letter passes, completions out
//! of order, a requeue and a reject, shutdown and a killed connection in
//! the middle.

use super::*;

/// Operating a dead-letter queue longer than the window a pass holds (1000
/// messages): a peek keeps the order, groups count both kinds, a replay of
/// one group moves exactly it and keeps the other's order; on a classic and
/// a quorum dead-letter queue.
pub(super) async fn dead_letter_passes_past_their_window_keep_the_order(backend: Backend) {
    use rabbit_backoff::QueueType;
    use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, ReplayOptions};
    use rabbit_backoff::transport::Confirm;
    const N: u64 = 1500;
    for queue_type in [QueueType::Classic, QueueType::Quorum] {
        let mut spec = ConsumerSpec::new(unique("dlq-window"), "1s".parse().unwrap());
        spec.queue_type = Some(queue_type);
        let _cleanup = backend.shared.then(|| Cleanup::of(&spec));
        let connection = backend.transport.connect().await.unwrap();
        rabbit_backoff::topology::declare_topology(&*connection, &Topology::of(&spec))
            .await
            .unwrap();
        let channel = connection.open_channel().await.unwrap();
        let dead_letter_queue = spec.names().dead_letter_queue;
        for id in 0..N {
            let properties = one_of_two_groups(id, &[]);
            let confirm = channel
                .publish(rabbit_backoff::transport::Publication::new(
                    "",
                    &dead_letter_queue,
                    b"{}",
                    properties,
                ))
                .await
                .unwrap();
            assert_eq!(confirm, Confirm::Ack);
        }
        let dlq = Dlq::with_transport(backend.transport.clone(), &spec)
            .await
            .unwrap();
        let ids = |report: &rabbit_backoff::dead_letters::DeadLetterReport| -> Vec<u64> {
            report
                .matched
                .iter()
                .map(|m| m.message_id.as_deref().unwrap()[2..].parse().unwrap())
                .collect()
        };
        let all = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
        assert_eq!(ids(&all), (0..N).collect::<Vec<_>>(), "{queue_type:?}");
        assert_eq!(all.kept, N as usize);
        let groups = dlq.groups(&DeadLetterFilter::default()).await.unwrap();
        assert_eq!(groups.len(), 2);
        let odd = groups
            .iter()
            .find(|g| g.fingerprint == "timeout after <n> ms")
            .unwrap();
        assert_eq!(odd.count, (N / 2) as usize);
        let replayed = dlq
            .replay(
                &DeadLetterFilter::default().group(odd.id.clone()),
                &ReplayOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(replayed.matched.len(), (N / 2) as usize);
        let rest = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
        assert_eq!(
            ids(&rest),
            (0..N).filter(|id| id % 2 == 0).collect::<Vec<_>>(),
            "{queue_type:?}"
        );
        let work = channel.check_queue(&spec.queue).await.unwrap();
        assert_eq!(
            work.messages,
            (N / 2) as u32,
            "the group is in the work queue"
        );
        let marker = format!("{dead_letter_queue}.pass");
        let probe = connection.open_channel().await.unwrap();
        assert!(
            probe.check_queue(&marker).await.is_err(),
            "a finished pass leaves no marker queue"
        );
        dlq.close().await;
        connection.close().await;
    }
}

/// Headers that nest more levels than a consumer accepts: it rejects the
/// delivery, and the broker dead-letters it as it is.
fn too_deep() -> BasicProperties {
    let mut table = FieldTable::default();
    for _ in 0..rabbit_backoff::rules::MAX_HEADER_DEPTH + 4 {
        let mut outer = FieldTable::default();
        outer.insert("a".into(), AMQPValue::FieldTable(table));
        table = outer;
    }
    props().with_headers(table)
}

/// Deliveries that finish in the reverse order of their tags are each
/// acknowledged once, and no acknowledgement covers one still being handled
/// (the broker would close the channel on a tag acknowledged twice).
pub(super) async fn out_of_order_completions_are_acked_once_each(backend: Backend) {
    let mut h = Harness::paced(&backend, "sem-order", |s| s.prefetch = 10).await;
    let health = h.health();
    for id in 0..10u64 {
        h.publish(&Step::ok(id, (10 - id) * 40), props()).await;
    }
    eventually("every step", WAIT, || (0..10).all(|id| h.handled(id) > 0)).await;
    h.stop_consumer().await;
    assert_eq!(h.depth(&h.spec.queue).await, 0, "every step acked");
    for id in 0..10 {
        assert_eq!(h.handled(id), 1, "step {id} handled once");
    }
    assert_eq!(health.reconnects(), 0, "the channel never failed");
    h.stop().await;
}

/// A requeue (a retry copy the broker refuses) and a reject (headers nested
/// too deep) among deliveries that succeed: each goes out after the
/// acknowledgements of what finished before it, and no acknowledgement
/// covers it, so the requeued one is back in its queue and the rejected one
/// in the dead-letter queue, dead-lettered by the broker.
pub(super) async fn a_requeue_and_a_reject_in_the_middle_of_a_run(backend: Backend) {
    use rabbit_backoff::topology::Argument;
    let queue = unique("sem-run");
    let mut spec = paced.spec();
    spec.queue = queue.clone();
    // A classic retry queue of length 0 refuses every copy at once; a quorum
    // one applies a length limit only after the fact.
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    let mut topology = Topology::of(&spec);
    let refusing = &mut topology.retry_queues[0].arguments;
    refusing.push(("x-max-length".into(), Argument::Int(0)));
    refusing.push(("x-overflow".into(), Argument::Str("reject-publish".into())));
    let _cleanup = backend.shared.then(|| Cleanup::of(&spec));
    declare_as_operator(&backend, &topology).await;
    let mut h = Harness::start_with(&backend, "sem-run", paced, |s| {
        s.queue = queue.clone();
        s.queue_type = Some(rabbit_backoff::QueueType::Classic);
        s.prefetch = 10;
        s.declare = rabbit_backoff::DeclareMode::Passive;
    })
    .await;
    let health = h.health();
    h.publish(&Step::ok(0, 50), props()).await;
    h.publish(&Step::transient(1), props()).await;
    h.publish(&Step::ok(2, 0), too_deep()).await;
    h.publish(&Step::ok(3, 50), props()).await;
    h.publish(&Step::ok(4, 50), props()).await;
    eventually("the run, and step 1 requeued", WAIT, || {
        [0, 3, 4].iter().all(|&id| h.handled(id) == 1) && h.handled(1) >= 2
    })
    .await;
    let rejected = h.next_dead_letter().await;
    h.stop_consumer().await;
    let step: Step = serde_json::from_slice(&rejected.data).unwrap();
    assert_eq!(step.id, 2);
    // Its headers, too deep for the framework, come set aside in one flat
    // header (as the frame guard hands them over): the broker's x-death is
    // among the entries, with the reason.
    let Some(AMQPValue::ByteArray(packed)) = header(
        &rejected.properties,
        rabbit_backoff::rules::headers::DEEP_HEADERS,
    ) else {
        panic!(
            "the deep headers set aside: {:?}",
            rejected.properties.headers()
        );
    };
    let entries = rabbit_backoff::rules::deep_headers::entries(packed.as_slice()).expect("packed");
    let death = entries
        .iter()
        .find(|e| e.name == "x-death")
        .expect("dead-lettered by the broker, with x-death");
    assert!(
        death.value.windows(8).any(|w| w == b"rejected"),
        "x-death says rejected"
    );
    assert_eq!(h.handled(2), 0, "never handled");
    for id in [0, 3, 4] {
        assert_eq!(h.handled(id), 1, "step {id} acked once");
    }
    assert!(h.journal.calls_for(1).iter().all(|s| s.retry_count == 0));
    eventually_async("step 1 back in its queue", WAIT, || async {
        h.depth(&queue).await == 1
    })
    .await;
    assert_eq!(h.depth(&topology.dead_letter_queue.name).await, 0);
    assert_eq!(health.reconnects(), 0, "the channel never failed");
    h.stop().await;
}

/// A shutdown while one delivery is being handled, some have finished and
/// more wait prefetched: what finished and the one in flight are
/// acknowledged, the prefetched ones return to the queue, nothing else.
pub(super) async fn shutdown_in_the_middle_of_a_run_acks_exactly_what_finished(backend: Backend) {
    let mut h = Harness::paced(&backend, "sem-shutdown", |s| {
        s.prefetch = 10;
        s.concurrency = Some(1);
    })
    .await;
    for id in 0..10u64 {
        let millis = if id == 4 { 1_000 } else { 10 };
        h.publish(&Step::ok(id, millis), props()).await;
    }
    eventually("step 4 started", WAIT, || h.handled(4) == 1).await;
    h.stop_consumer().await;
    for id in 0..5 {
        assert_eq!(h.handled(id), 1, "step {id} handled once");
    }
    for id in 5..10 {
        assert_eq!(h.handled(id), 0, "step {id} never started");
    }
    assert_eq!(
        h.depth(&h.spec.queue).await,
        5,
        "the five that never started, and nothing that finished"
    );
    h.stop().await;
}

/// The connection dies while one delivery is being handled and the ones
/// after it have finished: those were acknowledged (each on its own, since
/// the one before them was still open), the open one was not and comes
/// back once the consumer has reconnected.
pub(super) async fn a_killed_connection_redelivers_exactly_what_had_not_finished(backend: Backend) {
    let (through, killer) = backend.killable().await;
    let h = Harness::paced(&through, "sem-killed", |s| s.prefetch = 10).await;
    h.publish(&Step::ok(0, 2_000), props()).await;
    for id in 1..=6u64 {
        h.publish(&Step::ok(id, 0), props()).await;
    }
    eventually("steps 1 to 6", WAIT, || {
        (1..=6).all(|id| h.handled(id) == 1)
    })
    .await;
    // Longer than acknowledgements wait to be coalesced.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.handled(0), 1, "step 0 is still being handled");
    killer.kill();
    eventually("step 0 again, after the reconnection", WAIT, || {
        h.handled(0) == 2
    })
    .await;
    // The test's own channel went through the killed transport: look with
    // a new one.
    let connection = backend.transport.connect().await.expect("connect");
    let channel = connection.open_channel().await.expect("a channel");
    let queue = h.spec.queue.clone();
    eventually_async("step 0 acked the second time", WAIT, || async {
        let queue = channel.check_queue(&queue).await.expect("the queue");
        queue.messages == 0 && h.handled(0) == 2
    })
    .await;
    for id in 1..=6 {
        assert_eq!(h.handled(id), 1, "step {id} was acked before the kill");
    }
    let calls = h.journal.calls_for(0);
    assert_eq!(calls.len(), 2, "redelivered once");
    channel.close().await;
    connection.close().await;
    drop(killer);
    h.stop().await;
}
