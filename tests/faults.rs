//! Faults injected against the real broker: a broker restart, a killed
//! consumer process, refused confirms, a deleted retry queue, shutdowns.
//!
//! These tests stop the broker or kill processes, so they run one at a time
//! (the `SERIAL` lock) in a test binary of their own; `cargo test` runs test
//! binaries one after another, so no other test sees the broker go down. The
//! broker is started again even when a test fails.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use lapin::options::{BasicGetOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use rabbit_backoff::prelude::*;
use rabbit_backoff::{Health, Outgoing};
use serde::{Deserialize, Serialize};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Starts the broker's application again when dropped, so that a failing
/// test never leaves it stopped for the tests after it.
struct BrokerGuard;

impl Drop for BrokerGuard {
    fn drop(&mut self) {
        let _ = common::rabbitmqctl().arg("start_app").output();
        let _ = common::rabbitmqctl()
            .args(["await_startup", "--timeout", "60"])
            .output();
    }
}

/// The kind of job a load test publishes for `id`: 2% permanent, 8% transient
/// once, the rest succeed.
fn mixed(id: u64) -> Job {
    let fail = match id % 100 {
        0 | 50 => Fail::Permanent,
        1..=8 => Fail::Transient,
        _ => Fail::None,
    };
    Job {
        id,
        fail,
        attempts: Some(1),
    }
}

/// Ids the journal shows handled successfully, and how many extra successful calls.
fn successes(journal: &Journal) -> (BTreeSet<u64>, usize) {
    let mut per_id: HashMap<u64, usize> = HashMap::new();
    for seen in journal.calls() {
        let job = mixed(seen.id);
        let succeeded = match job.fail {
            Fail::None => true,
            Fail::Transient => seen.retry_count >= 1,
            _ => false,
        };
        if succeeded {
            *per_id.entry(seen.id).or_default() += 1;
        }
    }
    let duplicates = per_id.values().map(|n| n - 1).sum();
    (per_id.into_keys().collect(), duplicates)
}

async fn drain_ids(channel: &lapin::Channel, queue: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    while let Some(message) = channel
        .basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        #[derive(Deserialize)]
        struct Id {
            id: u64,
        }
        ids.push(
            serde_json::from_slice::<Id>(&message.delivery.data)
                .expect("an id")
                .id,
        );
    }
    ids
}

#[tokio::test]
async fn a_broker_restart_loses_no_message() {
    let _serial = SERIAL.lock().await;
    restart_loses_no_message("restart", |spec| spec.prefetch = 50).await;
}

/// The same with `retry = "scheduled"` on a quorum queue: the consumer
/// reads over AMQP 1.0, and the broker holds its retries back across the
/// restart. Before 4.3 the consumer refuses to start, declaring nothing.
#[tokio::test]
async fn a_broker_restart_loses_no_message_with_scheduled_retries() {
    let _serial = SERIAL.lock().await;
    let scheduled = |spec: &mut ConsumerSpec| {
        spec.prefetch = 50;
        spec.queue_type = Some(rabbit_backoff::QueueType::Quorum);
        spec.retry = rabbit_backoff::RetryBackend::Scheduled;
    };
    if broker_version() >= (4, 3) {
        restart_loses_no_message("restart-scheduled", scheduled).await;
        return;
    }
    let started = test_runtime(Journal::default())
        .consumer_with(process_job, |spec| {
            spec.queue = unique("restart-scheduled");
            scheduled(spec);
        })
        .start()
        .await;
    assert_scheduled_refused(started);
}

/// 3,000 messages of the mix, the broker's app stopped and started again
/// with a share handled: every success handled, every permanent failure
/// dead-lettered, nothing lost.
async fn restart_loses_no_message(name: &str, configure: impl FnOnce(&mut ConsumerSpec)) {
    const N: u64 = 3000;
    let running = Running::start(name, configure).await;
    let publisher = publisher().await;
    for id in 0..N {
        running.publish(&publisher, &mixed(id)).await;
    }
    publisher.close().await;
    eventually(
        "a share of the messages handled",
        Duration::from_secs(60),
        || running.journal.calls().len() >= 600,
    )
    .await;

    let guard = BrokerGuard;
    let restarted = Instant::now();
    run_rabbitmqctl(&["stop_app"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    run_rabbitmqctl(&["start_app"]);
    run_rabbitmqctl(&["await_startup", "--timeout", "60"]);
    drop(guard);

    let expected_successes = (0..N)
        .filter(|id| mixed(*id).fail != Fail::Permanent)
        .count();
    eventually(
        "every message handled after the restart",
        Duration::from_secs(120),
        || successes(&running.journal).0.len() == expected_successes,
    )
    .await;
    let recovered_in = restarted.elapsed();
    let (_c, channel) = channel().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dead: BTreeSet<u64> = drain_ids(&channel, &running.spec.names().dead_letter_queue)
        .await
        .into_iter()
        .collect();
    let permanent: BTreeSet<u64> = (0..N)
        .filter(|id| mixed(*id).fail == Fail::Permanent)
        .collect();
    assert!(
        permanent.is_subset(&dead),
        "missing dead letters: {:?}",
        permanent.difference(&dead).collect::<Vec<_>>()
    );
    let (handled, duplicates) = successes(&running.journal);
    let lost: Vec<u64> = (0..N)
        .filter(|id| !handled.contains(id) && !dead.contains(id))
        .collect();
    assert!(lost.is_empty(), "lost {} messages: {lost:?}", lost.len());
    println!(
        "broker restart ({name}): {N} messages, {} handled, {} dead-lettered, {duplicates} duplicates, 0 lost, all settled {recovered_in:?} after the restart began",
        handled.len(),
        dead.len()
    );
    running.stop().await;
}

/// `rabbitmqctl` off the test's runtime, so that the consumer under test
/// keeps running (and its timers keep firing) while the command waits.
async fn rabbitmqctl_off_runtime(args: &'static [&'static str]) {
    tokio::task::spawn_blocking(move || run_rabbitmqctl(args))
        .await
        .expect("rabbitmqctl does not panic");
}

/// When the broker's AMQP port first accepts a TCP connection, probing every
/// 10 ms from now on.
fn port_accepting() -> tokio::task::JoinHandle<Instant> {
    let uri: lapin::uri::AMQPUri = url().parse().expect("a valid AMQP_URL");
    let address = (uri.authority.host, uri.authority.port);
    tokio::spawn(async move {
        loop {
            if tokio::net::TcpStream::connect((address.0.as_str(), address.1))
                .await
                .is_ok()
            {
                return Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
}

/// A broker down for 8 s: long enough that the reconnect backoff (100 ms to
/// 30 s by default) has grown past 5 s. The consumer must be back within a
/// second of the broker accepting connections, not wait out that backoff.
/// Measured from the moment the AMQP port accepts again to the moment the
/// consumer has handled a message published as soon as the broker takes one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_is_back_within_a_second_of_a_broker_restart() {
    let _serial = SERIAL.lock().await;
    let running = Running::start("back", |_| {}).await;
    let before = publisher().await;
    running
        .publish(&before, &Job::new(1, Fail::None, None))
        .await;
    eventually("the first job", Duration::from_secs(10), || {
        running.journal.calls_for(1).len() == 1
    })
    .await;
    before.close().await;

    let guard = BrokerGuard;
    rabbitmqctl_off_runtime(&["stop_app"]).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let accepting = port_accepting();
    rabbitmqctl_off_runtime(&["start_app"]).await;
    let back = accepting.await.expect("the port watch does not panic");
    let deadline = Instant::now() + Duration::from_secs(60);
    let publisher = loop {
        match Publisher::connect(&url()).await {
            Ok(publisher) => break publisher,
            Err(e) => {
                assert!(Instant::now() < deadline, "no publisher connects: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let published_after = back.elapsed();
    running
        .publish(&publisher, &Job::new(2, Fail::None, None))
        .await;
    eventually(
        "the job published after the restart",
        Duration::from_secs(60),
        || running.journal.calls_for(2).len() == 1,
    )
    .await;
    let consuming_after = back.elapsed();
    rabbitmqctl_off_runtime(&["await_startup", "--timeout", "60"]).await;
    drop(guard);
    println!(
        "broker restart: the port accepted again, a publisher connected {published_after:?} later, the consumer handled its message {consuming_after:?} later"
    );
    assert!(
        consuming_after < Duration::from_millis(2500),
        "the consumer took {consuming_after:?} to consume again after the broker accepted connections"
    );
    publisher.close().await;
    running.stop().await;
}

// ---- SIGKILL: the consumer runs in a child process ----

#[derive(Debug, Serialize, Deserialize)]
struct Task {
    id: u64,
}

#[derive(Debug, thiserror::Error, Classify)]
enum TaskError {
    #[error("first attempt of {0} fails")]
    FirstAttempt(u64),
    #[error("cannot record: {0}")]
    Record(#[from] rabbit_backoff::Error),
}

/// Where the child records what it handled.
struct Results {
    queue: String,
    publisher: Publisher,
}

#[backoff_consumer(queue = "placeholder", delays = "100ms", prefetch = 20)]
async fn record(task: Task, ctx: &Context, results: State<Results>) -> Result<(), TaskError> {
    if task.id.is_multiple_of(10) && ctx.retry_count() == 0 {
        return Err(TaskError::FirstAttempt(task.id));
    }
    // Slow enough (about 400 messages a second) to be killed in the middle.
    tokio::time::sleep(Duration::from_millis(50)).await;
    results
        .publisher
        .publish("", &results.queue, Outgoing::json(&task)?)
        .await?;
    Ok(())
}

/// The child process of `a_killed_consumer_loses_no_message`: not a test of
/// its own (it is ignored, and refuses to run without its parent's settings).
#[test]
#[ignore = "the child process of a_killed_consumer_loses_no_message"]
fn child_consumer_process() {
    let queue = std::env::var("RB_CHILD_QUEUE").expect("run by a_killed_consumer_loses_no_message");
    let results =
        std::env::var("RB_CHILD_RESULTS").expect("run by a_killed_consumer_loses_no_message");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let publisher = Publisher::connect(&url()).await.unwrap();
        Runtime::builder()
            .uri(url())
            .state(Results {
                queue: results,
                publisher,
            })
            .consumer_with(record, |spec| spec.queue = queue)
            .run()
            .await
            .unwrap();
    });
}

fn spawn_child(queue: &str, results: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "child_consumer_process",
            "--exact",
            "--include-ignored",
            "--nocapture",
        ])
        .env("RB_CHILD_QUEUE", queue)
        .env("RB_CHILD_RESULTS", results)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child consumer")
}

#[tokio::test]
async fn a_killed_consumer_loses_no_message() {
    let _serial = SERIAL.lock().await;
    const N: u64 = 1000;
    let mut spec = record.spec();
    spec.queue = unique("killed");
    let results = format!("{}.results", spec.queue);
    let _cleanup = Cleanup::of(&spec).queue(&results);
    let (connection, channel) = channel().await;
    rabbit_backoff::topology::declare_topology(
        &*framework_connection().await,
        &rabbit_backoff::topology::Topology::of(&spec),
    )
    .await
    .unwrap();
    declare::queue(&channel, &results, FieldTable::default()).await;
    let publisher = publisher().await;
    for id in 0..N {
        publisher.publish_to(&spec, &Task { id }).await.unwrap();
    }

    let mut child = spawn_child(&spec.queue, &results);
    let mut recorded = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while recorded.len() < 100 {
        assert!(
            Instant::now() < deadline,
            "the child handled only {} messages",
            recorded.len()
        );
        recorded.extend(drain_ids(&channel, &results).await);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().expect("SIGKILL the child");
    child.wait().unwrap();
    let killed_after = recorded.len();

    let mut child = spawn_child(&spec.queue, &results);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        recorded.extend(drain_ids(&channel, &results).await);
        let unique: BTreeSet<u64> = recorded.iter().copied().collect();
        if unique.len() == N as usize {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {N} ids recorded after the restart",
            unique.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(depth(&channel, &spec.names().dead_letter_queue).await, 0);
    println!(
        "SIGKILL after {killed_after} of {N}: all {N} handled, {} duplicates, 0 lost",
        recorded.len() - N as usize
    );
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn a_refused_confirm_requeues_the_original_which_succeeds_later() {
    let _serial = SERIAL.lock().await;
    // A classic retry queue of length 0 refuses every copy at once; a quorum
    // one applies a length limit only after the fact.
    let running = Running::start("refused", |s| {
        s.queue_type = Some(rabbit_backoff::QueueType::Classic)
    })
    .await;
    let retry_queue = format!("{}.retry_100ms", running.spec.queue);
    let policy = format!("{}-full", running.spec.queue);
    let pattern = format!("^{}$", retry_queue.replace('.', "\\."));
    // The broker refuses every publish to the retry queue.
    run_rabbitmqctl(&[
        "set_policy",
        "--apply-to",
        "queues",
        "--priority",
        "100",
        &policy,
        &pattern,
        r#"{"max-length":0,"overflow":"reject-publish"}"#,
    ]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(1, Fail::Transient, Some(1)))
        .await;
    eventually(
        "a second first attempt (the requeued original)",
        Duration::from_secs(15),
        || {
            running
                .journal
                .calls_for(1)
                .iter()
                .filter(|s| s.retry_count == 0)
                .count()
                >= 2
        },
    )
    .await;
    let (_c, channel) = channel().await;
    assert_eq!(
        depth(&channel, &running.spec.names().dead_letter_queue).await,
        0,
        "not dead-lettered"
    );
    assert!(
        running
            .journal
            .calls_for(1)
            .iter()
            .all(|s| s.retry_count == 0),
        "never reached the retry tier"
    );

    run_rabbitmqctl(&["clear_policy", &policy]);
    eventually("the retried attempt", Duration::from_secs(15), || {
        running.journal.reached(1, 1)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        depth(&channel, &running.spec.queue).await,
        0,
        "acked after success"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_deleted_retry_queue_is_declared_again_and_nothing_is_lost() {
    let _serial = SERIAL.lock().await;
    let running = Running::start("deleted", |_| {}).await;
    let retry_queue = format!("{}.retry_100ms", running.spec.queue);
    let (_c, channel) = channel().await;
    channel
        .queue_delete(retry_queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(1, Fail::Transient, Some(1)))
        .await;
    eventually("the retried attempt", Duration::from_secs(15), || {
        running.journal.reached(1, 1)
    })
    .await;
    assert_eq!(
        depth(&channel, &retry_queue).await,
        0,
        "the retry queue exists again"
    );
    assert_eq!(
        depth(&channel, &running.spec.names().dead_letter_queue).await,
        0
    );
    running.stop().await;
}

// ---- Shutdown ----

#[derive(Debug, Serialize, Deserialize)]
struct Slow {
    id: u64,
    millis: u64,
}

#[derive(Debug, thiserror::Error, Classify)]
#[error("never")]
struct Never;

#[derive(Default)]
struct Progress {
    started: Mutex<Vec<u64>>,
    finished: Mutex<Vec<u64>>,
}

#[backoff_consumer(queue = "placeholder", delays = "1s")]
async fn slow(job: Slow, progress: State<Progress>) -> Result<(), Never> {
    progress.started.lock().unwrap().push(job.id);
    tokio::time::sleep(Duration::from_millis(job.millis)).await;
    progress.finished.lock().unwrap().push(job.id);
    Ok(())
}

/// A runtime with the slow consumer as `spec` describes it, recording in
/// `progress`, with `grace` to finish at shutdown; once it is ready.
async fn start_slow(
    spec: &ConsumerSpec,
    progress: &Arc<Progress>,
    grace: Duration,
) -> (
    rabbit_backoff::HealthWatch,
    rabbit_backoff::ShutdownHandle,
    tokio::task::JoinHandle<Result<(), rabbit_backoff::Error>>,
) {
    let runtime = Runtime::builder()
        .uri(url())
        .state_arc(progress.clone())
        .handle_signals(false)
        .shutdown_grace(grace)
        .consumer_with(slow, |s| *s = spec.clone())
        .build()
        .unwrap();
    let health = runtime.health();
    let shutdown = runtime.shutdown_handle();
    let task = tokio::spawn(runtime.run());
    health.wait_ready().await.unwrap();
    (health, shutdown, task)
}

/// Runs the slow consumer on a new queue, shuts it down while a handler is in
/// flight, and returns what the handler did, how long the shutdown took, the
/// queue and its cleanup.
async fn run_slow(
    name: &str,
    grace: Duration,
    job: Slow,
) -> (Arc<Progress>, Duration, String, Cleanup) {
    let queue = unique(name);
    let mut spec = slow.spec();
    spec.queue = queue.clone();
    let cleanup = Cleanup::of(&spec);
    let progress = Arc::new(Progress::default());
    let (health, shutdown, task) = start_slow(&spec, &progress, grace).await;
    let publisher = publisher().await;
    publisher.publish_to(&spec, &job).await.unwrap();
    eventually("the handler to start", Duration::from_secs(10), || {
        !progress.started.lock().unwrap().is_empty()
    })
    .await;
    let asked = Instant::now();
    shutdown.shutdown();
    task.await.unwrap().unwrap();
    assert_eq!(health.current(), Health::Stopped);
    (progress, asked.elapsed(), queue, cleanup)
}

#[tokio::test]
async fn shutdown_lets_a_slow_handler_finish_within_the_grace_period() {
    let _serial = SERIAL.lock().await;
    let job = Slow {
        id: 1,
        millis: 1000,
    };
    let (progress, took, queue, _cleanup) = run_slow("grace", Duration::from_secs(10), job).await;
    assert_eq!(
        *progress.finished.lock().unwrap(),
        [1],
        "the handler finished"
    );
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(10),
        "{took:?}"
    );
    let (_c, channel) = channel().await;
    assert_eq!(
        depth(&channel, &queue).await,
        0,
        "and its message was acked"
    );
}

#[tokio::test]
async fn shutdown_past_the_grace_period_leaves_the_message_for_redelivery() {
    let _serial = SERIAL.lock().await;
    let job = Slow {
        id: 2,
        millis: 5000,
    };
    let (progress, took, queue, _cleanup) =
        run_slow("deadline", Duration::from_millis(200), job).await;
    assert!(
        progress.finished.lock().unwrap().is_empty(),
        "cut off at the deadline"
    );
    assert!(
        took < Duration::from_secs(3),
        "stopped at the deadline: {took:?}"
    );
    let (_c, channel) = channel().await;
    let message = next_message(&channel, &queue, Duration::from_secs(5)).await;
    assert!(message.delivery.redelivered, "the broker redelivers it");
}

#[tokio::test]
async fn a_broker_that_is_down_at_start_up_is_waited_for() {
    let _serial = SERIAL.lock().await;
    let guard = BrokerGuard;
    run_rabbitmqctl(&["stop_app"]);
    let queue = unique("late");
    let journal = Journal::default();
    let runtime = test_runtime(journal.clone())
        .reconnect_backoff(Duration::from_millis(100), Duration::from_millis(500))
        .consumer_with(process_job, |spec| spec.queue = queue.clone())
        .build()
        .unwrap();
    let spec = runtime.specs().next().unwrap().clone();
    let mut health = runtime.health();
    let shutdown = runtime.shutdown_handle();
    let task = tokio::spawn(runtime.run());
    assert_eq!(
        health.changed().await,
        Some(Health::Recovering),
        "the first connection fails and is retried"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!task.is_finished(), "still trying");
    run_rabbitmqctl(&["start_app"]);
    run_rabbitmqctl(&["await_startup", "--timeout", "60"]);
    drop(guard);
    let _cleanup = Cleanup::of(&spec);
    health
        .wait_ready()
        .await
        .expect("connected once the broker is up");
    let publisher = publisher().await;
    publisher
        .publish_to(&spec, &Job::new(1, Fail::None, None))
        .await
        .unwrap();
    eventually("the job", Duration::from_secs(10), || {
        journal.calls_for(1).len() == 1
    })
    .await;
    shutdown.shutdown();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_channel_closed_by_the_broker_is_recovered() {
    let _serial = SERIAL.lock().await;
    let running = Running::start("channel", |_| {}).await;
    let mut health = running.health.clone();
    // Publishing to a missing exchange makes the broker close the consumer's
    // channel (NOT_FOUND), a loss lapin does not recover by itself.
    let (_c, channel) = channel().await;
    let retry_exchange = running.spec.names().retry_exchange;
    channel
        .exchange_delete(
            retry_exchange.as_str().into(),
            lapin::options::ExchangeDeleteOptions::default(),
        )
        .await
        .unwrap();
    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(1, Fail::Transient, Some(1)))
        .await;
    let noticed = tokio::time::timeout(Duration::from_secs(10), async {
        while health.changed().await != Some(Health::Recovering) {}
    });
    noticed
        .await
        .expect("the runtime notices the closed channel and recovers");
    eventually(
        "the retried attempt after recovery",
        Duration::from_secs(20),
        || running.journal.reached(1, 1),
    )
    .await;
    assert_eq!(health.current(), Health::Ready);
    assert_eq!(depth(&channel, &running.spec.queue).await, 0, "settled");
    running.stop().await;
}

#[tokio::test]
async fn shutdown_returns_prefetched_messages_at_once_for_other_instances() {
    let _serial = SERIAL.lock().await;
    let queue = unique("handback");
    let mut spec = slow.spec();
    spec.queue = queue.clone();
    spec.prefetch = 10;
    spec.concurrency = Some(1);
    let _cleanup = Cleanup::of(&spec);
    let progress = Arc::new(Progress::default());
    let (_health, shutdown, task) = start_slow(&spec, &progress, Duration::from_secs(10)).await;
    let publisher = publisher().await;
    for id in 0..5 {
        publisher
            .publish_to(&spec, &Slow { id, millis: 2000 })
            .await
            .unwrap();
    }
    eventually(
        "the first handler to start",
        Duration::from_secs(10),
        || !progress.started.lock().unwrap().is_empty(),
    )
    .await;
    let (_c, channel) = channel().await;
    assert_eq!(
        depth(&channel, &queue).await,
        0,
        "the other four are prefetched by this instance"
    );

    shutdown.shutdown();
    let deadline = Instant::now() + Duration::from_secs(1);
    while depth(&channel, &queue).await < 4 {
        assert!(
            Instant::now() < deadline,
            "the prefetched messages were not handed back within 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        progress.finished.lock().unwrap().is_empty(),
        "while the first handler is still running"
    );
    task.await.unwrap().unwrap();
    assert_eq!(
        progress.finished.lock().unwrap().len(),
        1,
        "the handler in flight finished"
    );
    assert_eq!(
        progress.started.lock().unwrap().len(),
        1,
        "no other handler started after the shutdown"
    );
    assert_eq!(
        depth(&channel, &queue).await,
        4,
        "the four wait for the next instance; the first was acked"
    );
}

/// A replay job whose broker restarts in its waves: its driver's connection
/// goes, the job is found interrupted, and resumed from its log it sends the
/// rest. Every dead letter ends in the work queue or, when the restart came
/// between its copy's record and its original's removal, still in the
/// dead-letter queue; none is sent twice and none is lost. No consumer
/// reads the work queue, so that every copy can be counted there (the job
/// goes on unwatched).
#[tokio::test]
async fn a_broker_restart_mid_replay_job_sends_no_message_twice() {
    use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, ReplayJobState, ReplayOptions};
    use rabbit_backoff::rules::{ReplayPlan, parse_threshold};
    const N: u64 = 100;
    let _serial = SERIAL.lock().await;
    // The topology, declared by a consumer that then goes.
    let running = Running::start("replay-restart", |_| {}).await;
    let spec = running.spec.clone();
    let _cleanup = running.stop().await;
    let dlq_name = spec.names().dead_letter_queue;
    let (_c, channel) = channel().await;
    channel.confirm_select(Default::default()).await.unwrap();
    for id in 0..N {
        let mut headers = FieldTable::default();
        headers.insert(
            "x-error".into(),
            lapin::types::AMQPValue::LongString("payment gateway unavailable".into()),
        );
        headers.insert(
            "x-retry-count".into(),
            lapin::types::AMQPValue::LongLongInt(3),
        );
        publish(
            &channel,
            "",
            &dlq_name,
            &serde_json::to_vec(&Job::new(id, Fail::None, None)).unwrap(),
            lapin::BasicProperties::default()
                .with_message_id(format!("m-{id}").into())
                .with_delivery_mode(2)
                .with_headers(headers),
        )
        .await;
    }
    let plan = ReplayPlan::new(5, parse_threshold("10%").unwrap())
        .unwrap()
        .fate_timeout(Duration::from_secs(1));
    let options = ReplayOptions::default().rate(20.0);
    let dlq = Dlq::connect(&url(), &spec).await.unwrap();
    let job = dlq
        .start_replay(&DeadLetterFilter::default(), &options, &plan)
        .await
        .unwrap();
    let id = job.id().to_owned();
    let driven = tokio::spawn(async move { job.run(&mut |_| {}).await });
    // Watched on the driver's own connection, whose lock the broker would
    // let it take again: the job runs, and a second one is refused.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = dlq.replay_job(&id).await.unwrap();
        assert_ne!(status.state, ReplayJobState::Interrupted);
        if status.state == ReplayJobState::Waves && status.counts.sent >= 30 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the waves never began: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(matches!(
        dlq.start_replay(&DeadLetterFilter::default(), &options, &plan)
            .await,
        Err(rabbit_backoff::dead_letters::ReplayJobError::Busy { .. })
    ));
    let guard = BrokerGuard;
    rabbitmqctl_off_runtime(&["stop_app"]).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    rabbitmqctl_off_runtime(&["start_app"]).await;
    rabbitmqctl_off_runtime(&["await_startup", "--timeout", "60"]).await;
    drop(guard);
    // The driver lost its connection: the job ends there, unfinished.
    let ended = tokio::time::timeout(Duration::from_secs(60), driven)
        .await
        .expect("the driver gives up")
        .expect("the driver does not panic");
    assert!(ended.is_err(), "{ended:?}");
    let dlq = Dlq::connect(&url(), &spec).await.unwrap();
    let status = dlq.replay_job(&id).await.unwrap();
    assert_eq!(status.state, ReplayJobState::Interrupted, "{status:?}");
    let sent_before = status.counts.sent;
    assert!((30..N).contains(&sent_before), "{sent_before}");
    let resumed = dlq
        .resume_replay(&id, Some("oncall"))
        .await
        .unwrap()
        .run(&mut |_| {})
        .await
        .unwrap();
    assert_eq!(resumed.state, ReplayJobState::Completed, "{resumed:?}");
    dlq.close().await;
    let (_c, channel) = common::channel().await;
    let copies = drain_ids(&channel, &spec.queue).await;
    let left = drain_ids(&channel, &dlq_name).await;
    let mut per_id: HashMap<u64, usize> = HashMap::new();
    for id in copies.iter().chain(&left) {
        *per_id.entry(*id).or_default() += 1;
    }
    // Only an original whose copy was confirmed in the last tenth of a
    // second before the connection went (its record not yet written) and
    // that no consumer saw can be in both places (at 20 a second, two or
    // three): the job cannot tell it from one whose copy never left, and
    // keeps it.
    let twice: Vec<_> = per_id.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.len() <= 5, "in both places: {twice:?}");
    assert_eq!(
        per_id.len() as u64,
        N,
        "lost: {} of {N} found",
        per_id.len()
    );
    assert_eq!(copies.len() + left.len() - twice.len(), N as usize);
    println!(
        "replay job across a broker restart: {N} dead letters, {sent_before} sent before it, {} copies in all, each once; {} originals kept beside their copies, 0 lost",
        copies.len(),
        twice.len()
    );
}
