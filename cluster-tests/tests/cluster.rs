//! Faults on a three-node RabbitMQ cluster: the node a consumer is connected
//! to killed with `kill -9` in the middle of a load, the leader of a retry
//! tier killed while messages wait in it, and classic queues whose node dies.
//!
//! Needs the cluster of `scripts/cluster.sh up` (nodes `rabbit-a`, `-b`, `-c`
//! `@localhost` on 127.0.0.1:5673-5675), which is why it lives in a crate
//! left out of the workspace's default members:
//! `cargo test --workspace --test cluster`
//! (`scripts/test.sh` starts the cluster, runs this, and stops it). The tests
//! kill nodes, so they run one at a time (`SERIAL`); a killed node is started
//! again, and rejoins, even when a test fails. Figures go to stderr
//! (`-- --nocapture` shows them).

// What the root's integration tests share: the broker, names, cleanup.
#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::time::Duration;

use common::*;
use futures_util::future::join_all;
use lapin::options::BasicGetOptions;
use lapin::{Connection, ConnectionProperties};
use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, GroupReport, GroupSource};
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::Topology;
use rabbit_backoff::{Health, QueueType, RunningRuntime};
use rabbit_backoff_cluster_tests::cluster_script::Cluster;
use rabbit_backoff_test_support::log_capture::LogCapture;
use serde::Deserialize;
use tokio::time::Instant;

/// The cluster these tests drive.
const CLUSTER: Cluster = Cluster::Localhost;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The cluster's nodes as RabbitMQ names them, and their AMQP ports.
const NODES: [(&str, u16); 3] = [
    ("rabbit-a@localhost", 5673),
    ("rabbit-b@localhost", 5674),
    ("rabbit-c@localhost", 5675),
];

fn node_url(node: usize) -> String {
    format!("amqp://guest:guest@127.0.0.1:{}/%2f", NODES[node].1)
}

/// The cluster's addresses as `AMQP_URL` takes them, comma-separated,
/// starting with node `first`.
fn cluster_url(first: usize) -> String {
    (0..NODES.len())
        .map(|k| node_url((first + k) % NODES.len()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Which node an address is, as `health().node()` shows it.
fn node_of(address: &str) -> usize {
    NODES
        .iter()
        .position(|(_, port)| address.contains(&format!("127.0.0.1:{port}/")))
        .unwrap_or_else(|| panic!("{address} is not a node of the cluster"))
}

/// Fails the test, saying what to do, unless all three nodes run in one cluster.
fn require_cluster() {
    let output = CLUSTER.script(&["status"]);
    let text = String::from_utf8_lossy(&output.stdout);
    let members: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("running in the cluster: "))
        .map(|m| m.split_whitespace().collect())
        .unwrap_or_default();
    assert!(
        output.status.success() && NODES.iter().all(|(node, _)| members.contains(node)),
        "these tests need the three-node cluster: run scripts/cluster.sh up first \
         (scripts/test.sh does). scripts/cluster.sh status says:\n{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A node killed by a test: started again by [`Revive::now`] or, when the
/// test fails before, on drop, so that the cluster is whole for the next test.
struct Revive {
    pending: bool,
}

impl Revive {
    /// `scripts/cluster.sh up`: the node starts and rejoins; how long it took.
    fn now(&mut self) -> Duration {
        let started = std::time::Instant::now();
        CLUSTER.sh(&["up"]);
        self.pending = false;
        require_cluster();
        started.elapsed()
    }
}

impl Drop for Revive {
    fn drop(&mut self) {
        if self.pending {
            let _ = CLUSTER.script(&["up"]);
        }
    }
}

/// `kill -9` of a node's Erlang VM; when it was killed.
fn kill(node: usize) -> (Revive, Instant) {
    let revive = Revive { pending: true };
    CLUSTER.sh(&["kill", NODES[node].0]);
    (revive, Instant::now())
}

/// A lapin connection to the first node that answers, starting with `first`.
async fn connect_from(first: usize) -> Connection {
    let mut errors = Vec::new();
    for k in 0..NODES.len() {
        let node = (first + k) % NODES.len();
        match Connection::connect(&node_url(node), ConnectionProperties::default()).await {
            Ok(connection) => return connection,
            Err(e) => errors.push(format!("{}: {e}", NODES[node].0)),
        }
    }
    panic!(
        "no node of the cluster answers ({}): run scripts/cluster.sh up",
        errors.join("; ")
    )
}

/// What each id of a load does: 2% fail permanently (dead-lettered), 5%
/// fail once and 3% twice before they succeed, the rest succeed at once.
fn mixed(id: u64) -> Job {
    match id % 100 {
        0 | 50 => Job::new(id, Fail::Permanent, None),
        1..=5 => Job::new(id, Fail::Transient, Some(1)),
        6..=8 => Job::new(id, Fail::Transient, Some(2)),
        _ => Job::new(id, Fail::None, None),
    }
}

/// A consumer spec of the test consumer on a new queue.
fn spec_of(name: &str, queue_type: QueueType) -> ConsumerSpec {
    let mut spec = process_job.spec();
    spec.queue = unique(name);
    spec.queue_type = Some(queue_type);
    spec.prefetch = 50;
    spec
}

/// Declares the whole topology through `node`: quorum queues get their
/// leader there, classic queues live there.
async fn declare_through(node: usize, spec: &ConsumerSpec) {
    let connection = rabbit_backoff::connect(&node_url(node))
        .await
        .expect("the framework connects to the node");
    rabbit_backoff::topology::declare_topology(&*connection, &Topology::of(spec))
        .await
        .expect("the topology is declared");
    connection.close().await;
}

/// Runs the test consumer for `spec` against the cluster's address list,
/// starting with node `first`; returns once it consumes.
async fn start(spec: &ConsumerSpec, first: usize, journal: &Journal) -> RunningRuntime {
    let spec = spec.clone();
    Runtime::builder()
        .uri(cluster_url(first))
        .state(journal.clone())
        .handle_signals(false)
        .shutdown_grace(Duration::from_secs(5))
        .consumer_with(process_job, |s| *s = spec)
        .start()
        .await
        .expect("the consumer starts on the cluster")
}

/// Publishes `jobs` through the framework's publisher, 250 confirms in flight.
async fn publish(publisher: &Publisher, spec: &ConsumerSpec, jobs: impl Iterator<Item = Job>) {
    let jobs: Vec<Job> = jobs.collect();
    for chunk in jobs.chunks(250) {
        for sent in join_all(chunk.iter().map(|job| publisher.publish_to(spec, job))).await {
            sent.expect("the broker confirms the job");
        }
    }
}

/// Takes every message of `queue` (auto-ack) and returns their ids.
async fn drain_ids(channel: &lapin::Channel, queue: &str) -> Vec<u64> {
    #[derive(Deserialize)]
    struct Id {
        id: u64,
    }
    let mut ids = Vec::new();
    while let Some(message) = channel
        .basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap_or_else(|e| panic!("basic.get on {queue}: {e}"))
    {
        ids.push(
            serde_json::from_slice::<Id>(&message.delivery.data)
                .expect("a job")
                .id,
        );
    }
    ids
}

/// How a load of [`mixed`] jobs ended.
struct Settled {
    handled: usize,
    dead_lettered: usize,
    /// Extra successful handler calls and extra dead letters.
    duplicates: usize,
}

/// Successful handler calls per id of `ids`, from the journal.
fn successes(journal: &Journal, ids: &Range<u64>) -> HashMap<u64, usize> {
    let mut per_id = HashMap::new();
    for seen in journal.calls() {
        if ids.contains(&seen.id) && mixed(seen.id).verdict(seen.retry_count) == Verdict::Ok {
            *per_id.entry(seen.id).or_default() += 1;
        }
    }
    per_id
}

/// Waits until every job of `ids` succeeded or sits in the dead-letter
/// queue, then (with `read_index`, see [`index_heals`]) reads the groups,
/// then takes the dead letters; fails naming the ids lost.
async fn settle(
    journal: &Journal,
    spec: &ConsumerSpec,
    ids: Range<u64>,
    within: Duration,
    read_index: bool,
) -> Settled {
    let expected_ok = ids
        .clone()
        .filter(|&id| mixed(id).verdict(u32::MAX) == Verdict::Ok)
        .count();
    let expected_dead = ids.clone().count() - expected_ok;
    let dlq = spec.names().dead_letter_queue;
    let connection = connect_from(0).await;
    let deadline = Instant::now() + within;
    loop {
        if successes(journal, &ids).len() == expected_ok {
            let channel = connection.create_channel().await.expect("a channel");
            if depth(&channel, &dlq).await as usize >= expected_dead {
                break;
            }
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if read_index {
        index_heals(spec, expected_dead).await;
    }
    let channel = connection.create_channel().await.expect("a channel");
    let dead = drain_ids(&channel, &dlq).await;
    let _ = connection.close(200, "".into()).await;
    let per_id = successes(journal, &ids);
    let dead_set: BTreeSet<u64> = dead.iter().copied().collect();
    let lost: Vec<u64> = ids
        .clone()
        .filter(|id| !per_id.contains_key(id) && !dead_set.contains(id))
        .collect();
    assert!(
        lost.is_empty(),
        "lost {} of {} jobs within {within:?} (neither handled nor dead-lettered): {:?}",
        lost.len(),
        ids.clone().count(),
        &lost[..lost.len().min(20)]
    );
    let wrongly_dead: Vec<u64> = dead_set
        .iter()
        .copied()
        .filter(|&id| mixed(id).verdict(u32::MAX) == Verdict::Ok)
        .collect();
    assert!(
        wrongly_dead.is_empty(),
        "dead-lettered jobs that succeed on a retry: {wrongly_dead:?}"
    );
    Settled {
        handled: per_id.len(),
        dead_lettered: dead_set.len(),
        duplicates: per_id.values().map(|n| n - 1).sum::<usize>() + (dead.len() - dead_set.len()),
    }
}

/// The dead-letter index of a quorum consumer (which the consumer writes,
/// `IndexFeed::Written`) heals after a node loss: `dlq groups` counts what
/// the dead-letter queue holds (at least `expected`: a dead letter can be
/// written twice), and within a minute answers from the index (after a
/// pass, when entries were lost with the node).
async fn index_heals(spec: &ConsumerSpec, expected: usize) {
    let dlq = Dlq::connect(&cluster_url(1), spec)
        .await
        .expect("the operator tools connect");
    let connection = connect_from(1).await;
    let started = Instant::now();
    let mut sources = Vec::new();
    let held = loop {
        let report = dlq
            .group_report(&DeadLetterFilter::default())
            .await
            .expect("dlq groups answers");
        let channel = connection.create_channel().await.expect("a channel");
        let held = depth(&channel, &spec.names().dead_letter_queue).await as usize;
        let total: usize = report.groups.iter().map(|g| g.count).sum();
        assert!(held >= expected, "{held} dead letters, {expected} expected");
        assert_eq!(total, held, "dlq groups counts every dead letter");
        sources.push(format!("{:?} ({})", report.source, report.reason()));
        if report.source == GroupSource::Index {
            break held;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the index did not heal within a minute: {sources:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!(
        "dead-letter index after the node loss: {held} dead letters, from the index after \
         {} read(s) in {:.1} s: {sources:?}",
        sources.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = connection.close(200, "".into()).await;
    dlq.close().await;
}

/// Waits until no new job of `ids` succeeds for `still` (at most `within`);
/// how many succeeded.
async fn quiet(journal: &Journal, ids: Range<u64>, still: Duration, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    let mut last = successes(journal, &ids).len();
    let mut since = Instant::now();
    while Instant::now() < deadline && since.elapsed() < still {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = successes(journal, &ids).len();
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    last
}

/// Waits until the runtime is ready on another node than `killed`; when.
async fn reconnected_elsewhere(
    running: &RunningRuntime,
    killed: usize,
    within: Duration,
) -> Instant {
    let health = running.health();
    let deadline = Instant::now() + within;
    loop {
        if health.current() == Health::Ready
            && let Some(node) = health.node()
            && node_of(&node) != killed
        {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "the consumer was not ready on another node within {within:?} of the kill (health {:?}, node {:?})",
            health.current(),
            health.node()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn killing_the_consumers_node_loses_nothing_and_it_consumes_again_from_another_node() {
    kill_the_consumers_node(spec_of("cluster-kill", QueueType::Quorum)).await;
}

/// The same with `retry = "scheduled"`: the consumer consumes over AMQP
/// 1.0, and the messages its node held back for their retries are held by
/// the queue's new leader.
#[tokio::test]
async fn killing_the_consumers_node_with_scheduled_retries_loses_nothing() {
    let mut spec = spec_of("cluster-kill-scheduled", QueueType::Quorum);
    spec.retry = rabbit_backoff::RetryBackend::Scheduled;
    kill_the_consumers_node(spec).await;
}

/// Kills the node a consumer of `spec` is connected to, which leads its
/// queues, under load: it consumes again from another node, nothing is
/// lost, and the node serves a next load once back.
async fn kill_the_consumers_node(spec: ConsumerSpec) {
    let _serial = SERIAL.lock().await;
    require_cluster();
    const N: u64 = 5000;
    const NEXT: u64 = 500;
    let first = 0;
    let _cleanup = Cleanup::of(&spec).at(&cluster_url(1));
    // Every queue's leader on the consumer's node: the kill takes them all.
    declare_through(first, &spec).await;
    let publisher = Publisher::connect(&cluster_url(1))
        .await
        .expect("a publisher connects");
    publish(&publisher, &spec, (0..N).map(mixed)).await;

    let journal = Journal::default();
    let running = start(&spec, first, &journal).await;
    let killed = node_of(&running.health().node().expect("connected"));
    assert_eq!(killed, first, "connected to the first node of the list");
    eventually(
        "a fifth of the jobs handled",
        Duration::from_secs(60),
        || journal.calls().len() as u64 >= N / 5,
    )
    .await;
    let (mut revive, killed_at) = kill(killed);
    let handled_at_kill = journal.calls().len();

    // Consuming again: a handler call through the new connection.
    let ready = reconnected_elsewhere(&running, killed, Duration::from_secs(10)).await;
    eventually(
        "a job handled through another node",
        Duration::from_secs(10),
        || journal.calls().iter().any(|s| s.at >= ready),
    )
    .await;
    let again = journal
        .calls()
        .iter()
        .filter(|s| s.at >= ready)
        .map(|s| s.at)
        .min()
        .expect("a call after the reconnection")
        - killed_at;
    assert!(
        again <= Duration::from_secs(10),
        "consumed again only {again:?} after the kill"
    );
    // What the cluster settles without the node: on RabbitMQ 3.10, retries
    // whose work queue had its leader there wait for it (see docs/cluster.md).
    let expected_ok = (0..N)
        .filter(|&id| mixed(id).verdict(u32::MAX) == Verdict::Ok)
        .count();
    let without_node = quiet(
        &journal,
        0..N,
        Duration::from_secs(3),
        Duration::from_secs(60),
    )
    .await;

    // The node comes back, rejoins, and serves a next load.
    let rejoined_in = revive.now();
    let back = Instant::now();
    let settled = settle(&journal, &spec, 0..N, Duration::from_secs(120), true).await;
    let settled_after = back.elapsed();
    let publisher_on_it = Publisher::connect(&node_url(killed))
        .await
        .expect("the node that came back takes connections");
    publish(&publisher_on_it, &spec, (N..N + NEXT).map(mixed)).await;
    let next = settle(&journal, &spec, N..N + NEXT, Duration::from_secs(60), false).await;
    eprintln!(
        "cluster, quorum, {} retries, kill -9 of the consumer's node ({}) after {handled_at_kill} calls: \
         consuming again {:.1} s after the kill, from {}; {without_node} of {expected_ok} \
         successes reached without the node; node back in the cluster in {:.1} s; all {N} \
         settled {:.1} s after it was back: {} handled, {} dead-lettered, lost 0, {} duplicates; \
         next run of {NEXT} through it: lost 0, {} duplicates; {} reconnects",
        spec.retry,
        NODES[killed].0,
        again.as_secs_f64(),
        running.health().node().unwrap_or_default(),
        rejoined_in.as_secs_f64(),
        settled_after.as_secs_f64(),
        settled.handled,
        settled.dead_lettered,
        settled.duplicates,
        next.duplicates,
        running.health().reconnects(),
    );
    publisher.close().await;
    publisher_on_it.close().await;
    running.stop().await.expect("the runtime stops");
}

/// A quorum queue's leader and members, from `rabbitmqctl list_queues`.
#[derive(Debug, Deserialize)]
struct QueueNodes {
    name: String,
    leader: String,
    members: Vec<String>,
}

/// The leader and members of every queue, asked of a running node.
fn queue_nodes(ask: usize) -> Vec<QueueNodes> {
    let output = common::rabbitmqctl()
        .args([
            "-n",
            NODES[ask].0,
            "-q",
            "list_queues",
            "name",
            "leader",
            "members",
            "--formatter",
            "json",
        ])
        .output()
        .expect("rabbitmqctl runs");
    assert!(
        output.status.success(),
        "rabbitmqctl list_queues failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Classic queues have no members: keep the quorum queues.
    let all: Vec<serde_json::Value> =
        serde_json::from_slice(&output.stdout).expect("a JSON list of queues");
    all.into_iter()
        .filter_map(|q| serde_json::from_value(q).ok())
        .collect()
}

#[tokio::test]
async fn a_message_waiting_in_a_retry_tier_whose_leader_dies_comes_back_and_completes() {
    let _serial = SERIAL.lock().await;
    require_cluster();
    const M: u64 = 50;
    let (consumer_node, tier_node) = (2, 1);
    const DELAY: Duration = Duration::from_secs(1);
    let mut spec = spec_of("cluster-tier", QueueType::Quorum);
    spec.delays = "1s".parse().expect("a delay");
    let _cleanup = Cleanup::of(&spec).at(&cluster_url(consumer_node));
    let topology = Topology::of(&spec);
    let tier = topology.retry_queues[0].name.clone();
    // The work queue led by the consumer's node, the retry tier by another.
    let connection = rabbit_backoff::connect(&node_url(consumer_node))
        .await
        .expect("connects");
    connection
        .open_channel()
        .await
        .expect("a channel")
        .declare_queue(&topology.work_queue)
        .await
        .expect("the work queue is declared");
    connection.close().await;
    declare_through(tier_node, &spec).await;
    let nodes = queue_nodes(consumer_node);
    for q in nodes.iter().filter(|q| q.name.starts_with(&spec.queue)) {
        assert_eq!(q.members.len(), 3, "{} is replicated on every node", q.name);
    }
    let leader = |name: &str| {
        nodes
            .iter()
            .find(|q| q.name == name)
            .map(|q| q.leader.clone())
            .unwrap_or_else(|| panic!("{name} is a quorum queue"))
    };
    assert_eq!(leader(&tier), NODES[tier_node].0);
    assert_eq!(leader(&spec.queue), NODES[consumer_node].0);

    let journal = Journal::default();
    let running = start(&spec, consumer_node, &journal).await;
    assert_eq!(
        node_of(&running.health().node().expect("connected")),
        consumer_node
    );
    let publisher = Publisher::connect(&cluster_url(consumer_node))
        .await
        .expect("a publisher connects");
    publish(
        &publisher,
        &spec,
        (0..M).map(|id| Job::new(id, Fail::Transient, Some(1))),
    )
    .await;
    let watch = connect_from(consumer_node).await;
    let channel = watch.create_channel().await.expect("a channel");
    let deadline = Instant::now() + Duration::from_secs(30);
    while depth(&channel, &tier).await < M as u32 {
        assert!(
            Instant::now() < deadline,
            "the jobs did not all reach the retry tier"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        (0..M).all(|id| !journal.reached(id, 1)),
        "every job still waits in the tier at the kill"
    );

    let (mut revive, killed_at) = kill(tier_node);
    eventually(
        "every job back from the tier and handled",
        Duration::from_secs(60),
        || (0..M).all(|id| journal.reached(id, 1)),
    )
    .await;
    let back: Vec<Duration> = (0..M)
        .map(|id| {
            journal
                .calls_for(id)
                .iter()
                .filter(|s| s.retry_count == 1)
                .map(|s| s.at - killed_at)
                .min()
                .expect("handled again")
        })
        .collect();
    let (earliest, latest) = (
        back.iter().min().copied().unwrap_or_default(),
        back.iter().max().copied().unwrap_or_default(),
    );
    // When the tier's delay ran out, from each job's first attempt.
    let due = (0..M)
        .filter_map(|id| journal.calls_for(id).first().map(|s| s.at + DELAY))
        .max()
        .expect("first attempts")
        .saturating_duration_since(killed_at);
    let _ = watch.close(200, "".into()).await;
    let rejoined_in = revive.now();
    let watch = connect_from(consumer_node).await;
    let channel = watch.create_channel().await.expect("a channel");
    assert_eq!(
        depth(&channel, &spec.names().dead_letter_queue).await,
        0,
        "nothing was dead-lettered"
    );
    eprintln!(
        "cluster, quorum, kill -9 of a retry tier's leader ({}) with {M} jobs waiting 1 s in it: \
         their delay ran out {:.1} s after the kill; all {M} back and handled {:.1}-{:.1} s after \
         the kill (lost 0); consumer on {} ({} reconnects); node back in the cluster in {:.1} s",
        NODES[tier_node].0,
        due.as_secs_f64(),
        earliest.as_secs_f64(),
        latest.as_secs_f64(),
        NODES[consumer_node].0,
        running.health().reconnects(),
        rejoined_in.as_secs_f64(),
    );
    let _ = watch.close(200, "".into()).await;
    publisher.close().await;
    running.stop().await.expect("the runtime stops");
}

#[tokio::test]
async fn classic_queues_whose_node_dies_wait_for_it_and_lose_nothing() {
    let _serial = SERIAL.lock().await;
    require_cluster();
    const N: u64 = 3000;
    const OUTAGE: Duration = Duration::from_secs(5);
    let home = 2;
    let spec = spec_of("cluster-classic", QueueType::Classic);
    let _cleanup = Cleanup::of(&spec).at(&cluster_url(0));
    // Classic queues live on the node that declared them.
    declare_through(home, &spec).await;
    let publisher = Publisher::connect(&cluster_url(0))
        .await
        .expect("a publisher connects");
    publish(&publisher, &spec, (0..N).map(mixed)).await;
    publisher.close().await;

    let journal = Journal::default();
    let running = start(&spec, home, &journal).await;
    assert_eq!(node_of(&running.health().node().expect("connected")), home);
    eventually(
        "a fifth of the jobs handled",
        Duration::from_secs(60),
        || journal.calls().len() as u64 >= N / 5,
    )
    .await;
    let (mut revive, killed_at) = kill(home);
    let before = journal.calls().iter().filter(|s| s.at < killed_at).count();
    tokio::time::sleep(OUTAGE).await;
    // Past the first second, when what was under way at the kill is over.
    let during = journal
        .calls()
        .iter()
        .filter(|s| s.at >= killed_at + Duration::from_secs(1))
        .count();
    let restart_took = revive.now();
    let restarted = Instant::now();
    let settled = settle(&journal, &spec, 0..N, Duration::from_secs(120), false).await;
    let settled_after = restarted.elapsed();
    eprintln!(
        "cluster, classic queues, kill -9 of their node ({}) after {before} calls: {} handler \
         calls from 1 s after the kill to the end of the {}-s outage; restart and rejoin {:.1} s; all {N} settled {:.1} s after \
         the node was back ({:.1} s after the kill): {} handled, {} dead-lettered, lost 0, {} \
         duplicates; {} reconnects",
        NODES[home].0,
        during,
        OUTAGE.as_secs(),
        restart_took.as_secs_f64(),
        settled_after.as_secs_f64(),
        killed_at.elapsed().as_secs_f64(),
        settled.handled,
        settled.dead_lettered,
        settled.duplicates,
        running.health().reconnects(),
    );
    running.stop().await.expect("the runtime stops");
}

/// A consumer that names no queue type, started with every node of the
/// cluster in its address, declares quorum queues and warns of nothing; one
/// that names `classic` chose it, and is not warned about either.
#[tokio::test]
async fn a_consumer_naming_no_type_declares_quorum_queues_on_the_cluster_and_warns_of_nothing() {
    let _serial = SERIAL.lock().await;
    require_cluster();
    let mut spec = spec_of("cluster-unchosen", QueueType::Classic);
    spec.queue_type = None;
    let _cleanup = Cleanup::of(&spec).at(&cluster_url(0));
    let risk = "a classic queue lives on one node";
    let log = LogCapture::start("warn");

    let running = start(&spec, 0, &Journal::default()).await;
    running.stop().await.expect("the consumer stops");
    // Declared again as quorum: equivalent, so the queue is one.
    let mut quorum = spec.clone();
    quorum.queue_type = Some(QueueType::Quorum);
    let running = start(&quorum, 0, &Journal::default()).await;
    running.stop().await.expect("the consumer stops");
    assert_eq!(log.warnings_with(risk), Vec::<String>::new());

    let mut classic = spec_of("cluster-chosen", QueueType::Classic);
    classic.queue_type = Some(QueueType::Classic);
    let _classic_cleanup = Cleanup::of(&classic).at(&cluster_url(0));
    let running = start(&classic, 0, &Journal::default()).await;
    running.stop().await.expect("the consumer stops");
    assert_eq!(
        log.warnings_with(risk),
        Vec::<String>::new(),
        "classic named: no warning"
    );
}

/// `dlq groups` given the cluster's nodes reads the dead-letter index
/// through another node when the node of its connection has no replica of
/// the index's streams (AMQP 0-9-1 reads a stream from the local replica:
/// `does not have a running replica on the local node`); after a node loss
/// a replica can stay stopped for minutes. Here the replicas on the first
/// node of the list are deleted.
#[tokio::test]
async fn dlq_groups_reads_the_index_through_another_node_when_its_own_has_no_replica() {
    let _serial = SERIAL.lock().await;
    require_cluster();
    let spec = spec_of("cluster-index-elsewhere", QueueType::Classic);
    let _cleanup = Cleanup::of(&spec).at(&cluster_url(0));
    let names = spec.names();
    let journal = Journal::default();
    let running = start(&spec, 0, &journal).await;
    let publisher = Publisher::connect(&cluster_url(0))
        .await
        .expect("the publisher connects");
    publish(
        &publisher,
        &spec,
        (0..3).map(|id| Job::new(id, Fail::Permanent, None)),
    )
    .await;
    let connection = connect_from(0).await;
    let channel = connection.create_channel().await.expect("a channel");
    eventually_async("three dead letters", Duration::from_secs(30), || async {
        depth(&channel, &names.dead_letter_queue).await == 3
    })
    .await;
    running.stop().await.expect("the consumer stops");
    publisher.close().await;

    for stream in [
        names.dead_letter_index(),
        names.dead_letter_index_removals(),
    ] {
        let call = format!(
            "rabbit_stream_queue:delete_replica(<<\"/\">>, <<\"{stream}\">>, '{}').",
            NODES[1].0
        );
        let output = CLUSTER.script(&["ctl", "-n", NODES[0].0, "eval", &call]);
        assert!(
            output.status.success() && String::from_utf8_lossy(&output.stdout).contains("ok"),
            "deleting the replica of {stream} on {}: {}{}",
            NODES[1].0,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // Alone, the node without the replicas cannot read the index.
    let report = groups_through(&node_url(1), &spec).await;
    assert_eq!(report.source, GroupSource::Pass, "{}", report.reason());
    assert!(
        report.reason().contains("running replica"),
        "{}",
        report.reason()
    );

    // Given every node, starting with it, it reads the index elsewhere.
    let report = groups_through(&cluster_url(1), &spec).await;
    assert_eq!(report.source, GroupSource::Index, "{}", report.reason());
    let total: usize = report.groups.iter().map(|g| g.count).sum();
    assert_eq!(total, 3, "{:?}", report.groups);
    let _ = connection.close(200, "".into()).await;
}

/// What `dlq groups` answers, connected through `uri`.
async fn groups_through(uri: &str, spec: &ConsumerSpec) -> GroupReport {
    let dlq = Dlq::connect(uri, spec)
        .await
        .expect("the operator tools connect");
    let report = dlq
        .group_report(&DeadLetterFilter::default())
        .await
        .expect("dlq groups answers");
    dlq.close().await;
    report
}
