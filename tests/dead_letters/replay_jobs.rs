//! Replay jobs against a real consumer: a canary that stops on a group
//! whose cause is still there and leaves the rest untouched, the same
//! replay sending everything once the cause is fixed, a second operator
//! turned away, a consumer that crashes mid-canary, and a group that keeps
//! growing while it is replayed. None of them sends a message twice or
//! loses one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rabbit_backoff::dead_letters::{
    ReplayControl, ReplayJobError, ReplayJobState, ReplayJobStatus, ReplayOutcome,
};
use rabbit_backoff::rules::{ReplayPlan, parse_threshold};

use super::*;

/// How long a group of a thousand takes to fail its way into the
/// dead-letter queue, or to come back to it.
const SETTLE: Duration = Duration::from_secs(90);

/// A downstream that fails until it is fixed, and what the handler did
/// with each order.
#[derive(Default, Clone)]
struct Downstream {
    fixed: Arc<AtomicBool>,
    /// Calls that succeeded, by job id.
    handled: Arc<Mutex<HashMap<u64, u32>>>,
    /// Calls that failed, by job id.
    failed: Arc<Mutex<HashMap<u64, u32>>>,
}

impl Downstream {
    fn handled(&self) -> HashMap<u64, u32> {
        self.handled.lock().unwrap().clone()
    }

    fn failed(&self) -> HashMap<u64, u32> {
        self.failed.lock().unwrap().clone()
    }
}

#[derive(Debug, thiserror::Error, Classify)]
enum DownstreamError {
    #[error("payment gateway unavailable")]
    Unavailable,
}

#[backoff_consumer(queue = "placeholder", delays = "50ms")]
async fn settle_order(job: Job, downstream: State<Downstream>) -> Result<(), DownstreamError> {
    if downstream.fixed.load(Ordering::SeqCst) {
        *downstream
            .handled
            .lock()
            .unwrap()
            .entry(job.id)
            .or_default() += 1;
        Ok(())
    } else {
        *downstream.failed.lock().unwrap().entry(job.id).or_default() += 1;
        Err(DownstreamError::Unavailable)
    }
}

/// A runtime with `settle_order` on `queue`, consuming.
struct Consumer {
    shutdown: rabbit_backoff::ShutdownHandle,
    task: tokio::task::JoinHandle<Result<(), rabbit_backoff::Error>>,
}

impl Consumer {
    async fn start(queue: &str, downstream: &Downstream) -> (Consumer, ConsumerSpec) {
        let runtime = test_runtime(downstream.clone())
            .consumer_with(settle_order, |spec| spec.queue = queue.to_owned())
            .build()
            .expect("a valid runtime");
        let spec = runtime.specs().next().cloned().expect("one consumer");
        let shutdown = runtime.shutdown_handle();
        let task = tokio::spawn(runtime.run());
        let connection = connect().await;
        let deadline = Instant::now() + WAIT;
        loop {
            let probe = connection.create_channel().await.unwrap();
            if declare::try_passive(&probe, queue)
                .await
                .is_ok_and(|q| q.consumer_count() > 0)
            {
                break;
            }
            assert!(!task.is_finished(), "the runtime stopped during start-up");
            assert!(
                Instant::now() < deadline,
                "{queue}'s consumer never started"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = connection.close(200, "".into()).await;
        (Consumer { shutdown, task }, spec)
    }

    async fn stop(self) {
        self.shutdown.shutdown();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the runtime stops")
            .expect("the runtime does not panic")
            .expect("the runtime ends without error");
    }
}

/// `n` orders published to the consumer of `spec`, failing their way into
/// the dead-letter queue while the downstream is down.
async fn failed_orders(spec: &ConsumerSpec, ids: std::ops::Range<u64>) {
    let publisher = publisher().await;
    for id in ids {
        publisher
            .publish_to(spec, &Job::new(id, Fail::None, None))
            .await
            .expect("publish an order");
    }
}

fn plan(canary: u32) -> ReplayPlan {
    ReplayPlan::new(canary, parse_threshold("10%").unwrap()).unwrap()
}

/// Runs a job to its end, returning its status and every state it went
/// through.
async fn run_job(
    dlq: &Dlq,
    plan: &ReplayPlan,
    options: &ReplayOptions,
) -> (ReplayJobStatus, Vec<ReplayJobState>) {
    let job = dlq
        .start_replay(&DeadLetterFilter::default(), options, plan)
        .await
        .expect("the job starts");
    let mut states = Vec::new();
    let status = job
        .run(&mut |status| {
            if states.last() != Some(&status.state) {
                states.push(status.state);
            }
        })
        .await
        .expect("the job runs to its end");
    (status, states)
}

#[tokio::test]
async fn a_canary_stops_on_a_cause_still_there_and_the_same_replay_sends_all_once_fixed() {
    const N: u64 = 1000;
    const CANARY: u32 = 20;
    counters::snapshotter();
    let downstream = Downstream::default();
    let (consumer, spec) = Consumer::start(&unique("replay-job"), &downstream).await;
    let _cleanup = Cleanup::of(&spec);
    let dlq_name = spec.names().dead_letter_queue;
    let (_connection, channel) = channel().await;
    failed_orders(&spec, 0..N).await;
    depth_within(&channel, &dlq_name, N as u32, SETTLE).await;
    let failed_before = downstream.failed();
    assert_eq!(failed_before.len(), N as usize);

    // The cause is still there: the canary fails, the job stops there.
    let dlq = connect_dlq(&spec).await;
    let options = ReplayOptions::default().by("alice");
    let (stopped, states) = run_job(&dlq, &plan(CANARY), &options).await;
    assert_eq!(
        stopped.state,
        ReplayJobState::StoppedOnFailures,
        "{stopped:?}"
    );
    assert_eq!(states.first(), Some(&ReplayJobState::Canary));
    assert!(!states.contains(&ReplayJobState::Waves), "{states:?}");
    assert_eq!(stopped.counts.sent, u64::from(CANARY));
    assert!(
        matches!(stopped.outcome, Some(ReplayOutcome::StoppedOnFailures { failing, of }) if failing * 10 > of),
        "{:?}",
        stopped.outcome
    );
    assert_eq!(stopped.by.as_deref(), Some("alice"));
    assert_eq!(
        stopped.errors.first().map(|e| e.error.as_str()),
        Some("payment gateway unavailable")
    );
    // Only the canary's messages went back to the consumer; the rest never
    // left the dead-letter queue.
    let retried: Vec<u64> = downstream
        .failed()
        .into_iter()
        .filter(|(id, calls)| failed_before[id] < *calls)
        .map(|(id, _)| id)
        .collect();
    assert!(
        retried.len() <= CANARY as usize,
        "{} messages were sent again, more than the canary",
        retried.len()
    );
    // The canary's copies fail their way back.
    depth_within(&channel, &dlq_name, N as u32, SETTLE).await;
    assert!(downstream.handled().is_empty());

    // Fixed: the same replay goes on in waves and sends every one, once.
    downstream.fixed.store(true, Ordering::SeqCst);
    let (completed, states) = run_job(&dlq, &plan(CANARY), &options).await;
    assert_eq!(completed.state, ReplayJobState::Completed, "{completed:?}");
    assert!(states.contains(&ReplayJobState::Waves), "{states:?}");
    assert_eq!(completed.counts.sent, N);
    assert_eq!(
        completed.canary.as_ref().map(|c| c.failing),
        Some(0),
        "{completed:?}"
    );
    let deadline = Instant::now() + SETTLE;
    while downstream.handled().len() < N as usize {
        assert!(
            Instant::now() < deadline,
            "{} of {N} handled",
            downstream.handled().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(depth(&channel, &dlq_name).await, 0);
    // Their fates all came back, in the log and in the consumer's metrics.
    let status = dlq.replay_job(&completed.id).await.unwrap();
    assert_eq!(status.counts.handled, N, "{:?}", status.counts);
    assert_eq!(status.counts.waiting, 0);
    let fates = |fate| {
        counters::counter_with(
            rabbit_backoff::meters::REPLAY_FATES,
            &[("consumer", spec.queue.as_str()), ("fate", fate)],
        )
    };
    assert_eq!(fates("handled"), N);
    assert!(
        fates("retrying") >= u64::from(CANARY),
        "{}",
        fates("retrying")
    );
    // And the jobs' own, by outcome.
    let jobs = |outcome| {
        counters::counter_with(
            rabbit_backoff::dead_letters::replay_meters::REPLAY_JOBS,
            &[("queue", dlq_name.as_str()), ("outcome", outcome)],
        )
    };
    assert_eq!((jobs("stopped-on-failures"), jobs("completed")), (1, 1));
    consumer.stop().await;
    let handled = downstream.handled();
    assert!(
        handled.values().all(|calls| *calls == 1),
        "handled twice: {:?}",
        handled.iter().filter(|(_, c)| **c > 1).collect::<Vec<_>>()
    );
    // Both jobs are in the log, in order, with who ran them.
    let jobs = dlq.replay_jobs().await.unwrap();
    let states: Vec<_> = jobs.iter().map(|j| (j.id.clone(), j.state)).collect();
    assert!(
        states.contains(&(stopped.id.clone(), ReplayJobState::StoppedOnFailures))
            && states.contains(&(completed.id.clone(), ReplayJobState::Completed)),
        "{states:?}"
    );
    dlq.close().await;
}

#[tokio::test]
async fn a_second_operator_is_turned_away_and_controls_reach_the_running_job() {
    let downstream = Downstream::default();
    downstream.fixed.store(true, Ordering::SeqCst);
    let (consumer, spec) = Consumer::start(&unique("replay-two"), &downstream).await;
    let _cleanup = Cleanup::of(&spec);
    let (_connection, channel) = confirm_channel().await;
    for id in 0..200 {
        dead_letter(&channel, &spec, id, "payment gateway unavailable", 1).await;
    }
    let first = connect_dlq(&spec).await;
    let second = connect_dlq(&spec).await;
    let options = ReplayOptions::default().by("alice").rate(100.0);
    let job = first
        .start_replay(&DeadLetterFilter::default(), &options, &plan(10))
        .await
        .unwrap();
    let id = job.id().to_owned();
    match second
        .start_replay(
            &DeadLetterFilter::default(),
            &options.clone().by("bob"),
            &plan(10),
        )
        .await
    {
        Err(ReplayJobError::Busy { job, .. }) => assert_eq!(job.as_deref(), Some(id.as_str())),
        other => panic!("the second operator was not turned away: {:?}", other.err()),
    }
    let driven = tokio::spawn(async move {
        let status = job.run(&mut |_| {}).await;
        (status, first)
    });
    // Pause once the waves have begun; nothing is sent while paused.
    let deadline = Instant::now() + SETTLE;
    loop {
        let status = second.replay_job(&id).await.unwrap();
        if status.state == ReplayJobState::Waves && status.counts.sent > 20 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the waves never began: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let paused = second
        .control_replay(&id, ReplayControl::Pause, Some("bob"))
        .await
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while second.replay_job(&id).await.unwrap().state != ReplayJobState::Paused {
        assert!(Instant::now() < deadline, "the job never paused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let held = second.replay_job(&id).await.unwrap().counts.sent;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        second.replay_job(&id).await.unwrap().counts.sent <= held + 1,
        "it sent while paused"
    );
    assert!(paused.counts.sent < 200);
    second
        .control_replay(&id, ReplayControl::Resume, Some("bob"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    second
        .control_replay(&id, ReplayControl::Stop, Some("carol"))
        .await
        .unwrap();
    let (status, first) = tokio::time::timeout(SETTLE, driven).await.unwrap().unwrap();
    let status = status.unwrap();
    assert_eq!(status.state, ReplayJobState::Stopped);
    assert_eq!(
        status.outcome,
        Some(ReplayOutcome::Stopped {
            by: Some("carol".into())
        })
    );
    let actions: Vec<_> = status
        .controls
        .iter()
        .map(|c| (c.action, c.by.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        actions,
        [
            (ReplayControl::Pause, "bob".to_owned()),
            (ReplayControl::Resume, "bob".to_owned()),
            (ReplayControl::Stop, "carol".to_owned()),
        ]
    );
    // What it did not send stays; what it sent was handled once.
    let sent = status.counts.sent;
    assert!(sent < 200, "{sent}");
    depth_within(
        &channel,
        &spec.names().dead_letter_queue,
        (200 - sent) as u32,
        WAIT,
    )
    .await;
    let deadline = Instant::now() + WAIT;
    while (downstream.handled().len() as u64) < sent {
        assert!(Instant::now() < deadline, "the copies were not all handled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(downstream.handled().values().all(|c| *c == 1));
    assert_eq!(downstream.handled().len() as u64, sent);
    // The lock went with the job: the second operator can start one now.
    let next = second
        .start_replay(&DeadLetterFilter::default(), &options, &plan(5))
        .await
        .expect("the lock was released");
    drop(next);
    consumer.stop().await;
    first.close().await;
    second.close().await;
}

#[tokio::test]
async fn a_consumer_gone_mid_canary_neither_loses_nor_doubles_a_copy() {
    const N: u64 = 30;
    let downstream = Downstream::default();
    downstream.fixed.store(true, Ordering::SeqCst);
    let queue = unique("replay-crash");
    let (_connection, channel) = confirm_channel().await;
    let (consumer, spec) = Consumer::start(&queue, &downstream).await;
    let _cleanup = Cleanup::of(&spec);
    for id in 0..N {
        dead_letter(&channel, &spec, id, "payment gateway unavailable", 1).await;
    }
    let dlq = connect_dlq(&spec).await;
    let watcher = connect_dlq(&spec).await;
    let plan = plan(10).fate_timeout(Duration::from_secs(60));
    let job = dlq
        .start_replay(
            &DeadLetterFilter::default(),
            &ReplayOptions::default().rate(5.0),
            &plan,
        )
        .await
        .unwrap();
    let id = job.id().to_owned();
    let driven = tokio::spawn(async move {
        let status = job.run(&mut |_| {}).await;
        (status, dlq)
    });
    // The consumer goes away after the canary's first copies: the rest
    // wait in the work queue, with no fate, until a consumer comes back.
    let deadline = Instant::now() + WAIT;
    while watcher.replay_job(&id).await.unwrap().counts.sent < 3 {
        assert!(Instant::now() < deadline, "the canary never began");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    consumer.stop().await;
    depth_within(
        &channel,
        &queue,
        10 - downstream.handled().len() as u32,
        WAIT,
    )
    .await;
    let waiting = watcher.replay_job(&id).await.unwrap();
    assert_eq!(waiting.state, ReplayJobState::Canary, "{waiting:?}");
    assert_eq!(waiting.counts.sent, 10, "the canary waits for its fates");
    let (consumer, _) = Consumer::start(&queue, &downstream).await;
    let (status, dlq) = tokio::time::timeout(SETTLE, driven).await.unwrap().unwrap();
    let status = status.unwrap();
    assert_eq!(status.state, ReplayJobState::Completed, "{status:?}");
    assert_eq!(
        status.canary.as_ref().map(|c| (c.failing, c.of)),
        Some((0, 10)),
        "the canary waited for the consumer's fates"
    );
    let deadline = Instant::now() + SETTLE;
    while (downstream.handled().len() as u64) < N {
        assert!(Instant::now() < deadline, "not all handled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    consumer.stop().await;
    assert!(downstream.handled().values().all(|c| *c == 1));
    assert_eq!(depth(&channel, &spec.names().dead_letter_queue).await, 0);
    dlq.close().await;
    watcher.close().await;
}

#[tokio::test]
async fn a_group_that_keeps_growing_is_replayed_once_and_the_newcomers_wait() {
    const N: u64 = 300;
    const MORE: u64 = 100;
    let downstream = Downstream::default();
    downstream.fixed.store(true, Ordering::SeqCst);
    let (consumer, spec) = Consumer::start(&unique("replay-growing"), &downstream).await;
    let _cleanup = Cleanup::of(&spec);
    let (_connection, channel) = confirm_channel().await;
    for id in 0..N {
        dead_letter(&channel, &spec, id, "payment gateway unavailable", 1).await;
    }
    let dlq = connect_dlq(&spec).await;
    let job = dlq
        .start_replay(
            &DeadLetterFilter::default(),
            &ReplayOptions::default().rate(400.0),
            &plan(10),
        )
        .await
        .unwrap();
    let driven = tokio::spawn(async move {
        let status = job.run(&mut |_| {}).await;
        (status, dlq)
    });
    // The group grows while the job runs.
    let (_feeder, feeder) = confirm_channel().await;
    for id in N..N + MORE {
        dead_letter(&feeder, &spec, id, "payment gateway unavailable", 1).await;
    }
    let (status, dlq) = tokio::time::timeout(SETTLE, driven).await.unwrap().unwrap();
    let status = status.unwrap();
    assert_eq!(status.state, ReplayJobState::Completed, "{status:?}");
    let sent = status.counts.sent;
    assert!((N..=N + MORE).contains(&sent), "{sent}");
    let deadline = Instant::now() + SETTLE;
    while (downstream.handled().len() as u64) < sent {
        assert!(Instant::now() < deadline, "not all handled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    consumer.stop().await;
    let handled = downstream.handled();
    assert!(
        handled.values().all(|c| *c == 1),
        "a message was sent twice"
    );
    assert_eq!(handled.len() as u64, sent);
    // Every original is handled or still waits in the dead-letter queue.
    assert_eq!(
        u64::from(depth(&channel, &spec.names().dead_letter_queue).await) + sent,
        N + MORE
    );
    assert!((0..N).all(|id| handled.contains_key(&id)));
    dlq.close().await;
}
