//! The topology: a conflict named, retries back to their own queue only,
//! exponential tiers declared and used, 4.3's delayed retries.

use super::*;

pub(super) async fn a_topology_conflict_names_the_queue_and_argument(backend: Backend) {
    let queue = unique("sem-conflict");
    let mut spec = process_job.spec();
    spec.queue = queue.clone();
    let cleanup = backend.shared.then(|| Cleanup::of(&spec));
    // The retry queue exists with another TTL.
    let mut topology = Topology::of(&spec);
    topology.retry_queues[0]
        .arguments
        .retain(|(name, _)| name != "x-message-ttl");
    topology.retry_queues[0].arguments.push((
        "x-message-ttl".into(),
        rabbit_backoff::topology::Argument::Int(999),
    ));
    let connection = backend.transport.connect().await.expect("connect");
    rabbit_backoff::topology::declare_topology(&*connection, &topology)
        .await
        .expect("the other topology");
    let started = Runtime::builder()
        .transport(Arc::clone(&backend.transport))
        .state(Journal::default())
        .handle_signals(false)
        .consumer_with(process_job, |s| s.queue = queue.clone())
        .start()
        .await;
    match started {
        Err(Error::TopologyConflict {
            object,
            name,
            argument,
            ..
        }) => {
            assert_eq!(object, "queue");
            assert_eq!(name, format!("{queue}.retry_100ms"));
            assert_eq!(argument.as_deref(), Some("x-message-ttl"));
        }
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("started despite the conflict"),
    }
    connection.close().await;
    drop(cleanup);
}

pub(super) async fn retries_return_only_to_their_own_queue_on_a_fanout_exchange(backend: Backend) {
    let exchange = unique("sem-fanout");
    let mut consumers = Vec::new();
    for side in ["a", "b"] {
        let exchange = exchange.clone();
        consumers.push(
            Harness::start(&backend, &format!("sem-fanout-{side}"), move |s| {
                s.names.exchange = Some(exchange);
                s.exchange_kind = rabbit_backoff::ExchangeKind::Fanout;
            })
            .await,
        );
    }
    let _cleanup = backend
        .shared
        .then(|| Cleanup::default().exchange(&exchange));
    // Fails once in each queue, then succeeds on its retry.
    consumers[0]
        .publish(&Job::new(1, Fail::Transient, Some(1)), props())
        .await;
    for h in &consumers {
        eventually("the retry", WAIT, || h.journal.reached(1, 1)).await;
    }
    for mut h in consumers {
        h.stop_consumer().await;
        let counts = h.journal.retry_counts(1);
        assert_eq!(counts, [0, 1], "{}: its own retry only", h.spec.queue);
        h.stop().await;
    }
}

pub(super) async fn exponential_jittered_tiers_are_declared_and_used(backend: Backend) {
    let h = Harness::start(&backend, "sem-jitter", |s| {
        s.delays = "exponential(100ms, x2, 3)".parse().unwrap();
        s.jitter = Some("20%".parse().unwrap());
    })
    .await;
    // 15 retry queues: five around each of 100, 200 and 400 ms.
    let names = h.spec.names();
    let delays = h.spec.retry_delays();
    assert_eq!(delays.len(), 15);
    for &ms in &delays {
        assert_eq!(h.depth(&names.retry_queue(ms)).await, 0, "{ms}ms declared");
    }
    for id in 0..40 {
        h.publish(&Job::new(id, Fail::Transient, Some(1)), props())
            .await;
    }
    eventually("every retry", WAIT, || {
        (0..40).all(|id| h.journal.reached(id, 1))
    })
    .await;
    let used: std::collections::BTreeSet<String> = h
        .journal
        .calls()
        .into_iter()
        .filter_map(|s| s.came_from)
        .collect();
    let first_tier: Vec<String> = Jitter::spread("20%".parse().unwrap(), 100)
        .into_iter()
        .map(|ms| names.retry_queue(ms))
        .collect();
    assert!(used.iter().all(|q| first_tier.contains(q)), "{used:?}");
    assert!(
        used.len() >= 3,
        "40 retries spread over several sub-queues: {used:?}"
    );
    h.stop().await;
}

/// `retry = "delayed"`: on RabbitMQ 4.3 a failed message is rejected with
/// requeue and the quorum work queue holds it back on the linear ladder
/// (100, 200, 300 ms: the test consumer's delays), counted in
/// `x-delivery-count`; one that keeps failing ends in the dead-letter queue
/// with `x-error` and its count; a permanent one goes there at once; no
/// retry queue exists. On a broker that would ignore the arguments (3.10,
/// 4.0, the in-memory broker emulating 3.10) the consumer refuses to start,
/// naming the queue and the argument, and declares nothing.
pub(super) async fn delayed_retries_wait_on_4_3_and_are_refused_before(backend: Backend) {
    let delayed = |spec: &mut ConsumerSpec| {
        spec.queue_type = Some(QueueType::Quorum);
        spec.retry = RetryBackend::Delayed;
    };
    if !backend.applies_delayed_retries() {
        let queue = unique("sem-delayed-refused");
        let started = Runtime::builder()
            .transport(Arc::clone(&backend.transport))
            .state(Journal::default())
            .handle_signals(false)
            .consumer_with(process_job, |s| {
                s.queue = queue.clone();
                delayed(s);
            })
            .start()
            .await;
        let error = match started {
            Err(error) => error,
            Ok(_) => panic!("a delayed consumer started on a broker that ignores delayed retries"),
        };
        let message = error.to_string();
        match error {
            Error::InvalidSpec {
                queue: refused,
                source: SpecError::DelayedUnsupported { argument, .. },
            } => {
                assert_eq!(refused, queue);
                assert_eq!(argument, "x-delayed-retry-type");
            }
            other => panic!("another error: {other}"),
        }
        assert!(
            message.contains(&queue)
                && message.contains("x-delayed-retry-type")
                && message.contains("retry = \"tiers\""),
            "{message}"
        );
        assert_not_declared(&*backend.transport, &queue).await;
        return;
    }
    let h = Harness::start(&backend, "sem-delayed", delayed).await;
    h.publish(&Job::new(1, Fail::Transient, Some(1)), props())
        .await;
    h.publish(&Job::new(2, Fail::Transient, None), props())
        .await;
    h.publish(&Job::new(3, Fail::Permanent, None), props())
        .await;
    let [exhausted, permanent] = &h.dead_jobs([2, 3]).await;
    assert_dead_letter(exhausted, "exhausted", 3, "dependency unavailable (job 2)");
    // No tier: a count of 0, written.
    assert_dead_letter(permanent, "permanent", 0, "job 3 is invalid");
    eventually("job 1 retried to success", WAIT, || h.journal.reached(1, 1)).await;
    let counts = |id| h.journal.retry_counts(id);
    assert_eq!(counts(1), [0, 1], "failed once, handled after the delay");
    assert_eq!(
        counts(2),
        [0, 1, 2, 3],
        "every retry held back, none at once"
    );
    assert_eq!(counts(3), [0], "a permanent failure never waits");
    for id in [1, 2] {
        let calls = h.journal.calls_for(id);
        for (gap, delay) in calls.windows(2).zip([100u64, 200, 300]) {
            let waited = gap[1].at.duration_since(gap[0].at);
            assert!(
                waited >= Duration::from_millis(delay),
                "job {id}: retry after {delay}ms came after {waited:?}"
            );
        }
    }
    let names = h.spec.names();
    let probe = backend.transport.connect().await.expect("connect");
    // A refused check closes its channel: one channel each.
    let channel = probe.open_channel().await.expect("a channel");
    assert!(
        channel
            .check_queue(&names.retry_queue(100))
            .await
            .is_err_and(|e| e.is_not_found()),
        "no retry queue is declared"
    );
    let channel = probe.open_channel().await.expect("a channel");
    assert!(
        channel
            .check_exchange(&names.retry_exchange)
            .await
            .is_err_and(|e| e.is_not_found()),
        "no retry exchange is declared"
    );
    probe.close().await;
    h.stop().await;
}
