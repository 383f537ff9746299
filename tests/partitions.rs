//! Network faults on a three-node RabbitMQ cluster whose nodes are hosts of
//! their own (network namespaces on a bridge: `CLUSTER_NETNS=1
//! scripts/cluster.sh up`), under a steady load of the orders mix, checked
//! by a history of what the broker confirmed (tests/common/history.rs):
//! every confirmed message handled exactly once (one effect row, written
//! through `Tx` with `dedupe` on PostgreSQL) or dead-lettered with a reason.
//!
//! Faults: the minority node cut off and healed; the consumer's node cut off
//! from the clients (not from the cluster); the leader of the work queue, and
//! of a retry tier, partitioned away; the consumer's node (leading the work
//! queue) cut off for two minutes, which on 4.x the runtime's metadata watch
//! must leave for the majority within `PAUSE_BOUND`; a rolling restart of the
//! three nodes; a slow, lossy link. Each also runs with `retry =
//! "scheduled"` (retries held back by the work queue over AMQP 1.0, 4.3
//! only), where the retry tier's leader becomes the dead-letter queue's.
//!
//! Built only with the feature `partition-tests`: `cargo test --features
//! partition-tests --test partitions -- --nocapture` (scripts/test.sh runs
//! it once per fault on 4.3; scripts/partitions.sh repeats it, with both
//! partition handlings and classic queues). The tests change the network, so
//! they run one at a time (`SERIAL`), and undo every fault even when they
//! fail (`Heal`). Environment: `PARTITION_REPEATS` (runs per fault, default
//! 1), `PARTITION_QUEUE_TYPE` (`quorum`, the default, or `classic`: then only
//! duplicate effects fail the test, losses are reported),
//! `PARTITION_HOLD_SECS` (how long a cut lasts, default 15),
//! `PARTITION_LONG_HOLD_SECS` (the long cut, default 120),
//! `CLUSTER_PARTITION_HANDLING` and `RABBITMQ_VERSION` (as given to
//! scripts/cluster.sh, for the report).

#[path = "common/cluster_script.rs"]
mod cluster_script;
mod common;

use cluster_script::Cluster;
#[path = "common/counters.rs"]
mod counters;
#[path = "common/history.rs"]
mod history;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::stores::{self, PgCleanup};
use common::{Cleanup, Fail, Job, Verdict, assert_scheduled_refused, depth, unique};
use counters::{counter, snapshotter};
use history::{Expect, History, Report};
use lapin::options::BasicGetOptions;
use lapin::{Connection, ConnectionProperties};
use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, GroupSource};
use rabbit_backoff::dedupe::{Tx, sqlx};
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::Topology;
use rabbit_backoff::{Dedupe, QueueType, RetryBackend, RunningRuntime};
use tokio::time::Instant;

/// The cluster these tests drive.
const CLUSTER: Cluster = Cluster::Netns;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Messages published per second by the load.
const RATE: u64 = 100;
/// Load before the fault and after it is over.
const AROUND: Duration = Duration::from_secs(3);
/// How long everything confirmed may take to settle once the fault is over.
const SETTLE: Duration = Duration::from_secs(120);
/// The longest pause in handling allowed when the consumer's node is cut
/// off from the majority: the metadata leader's election when the cut node
/// led it (about `net_ticktime`, 10 s here), the metadata watch's 12 s to
/// notice, the reconnection and the topology's declaration: about 27 s at
/// worst; measured 7-18 s.
const PAUSE_BOUND: Duration = Duration::from_secs(40);
/// Heartbeat of the consumer's and publisher's connections: a link that
/// drops packets is noticed within about two of them.
const HEARTBEAT_SECS: u32 = 5;

// ---- the cluster ----

/// One node: its name and AMQP URL, as `scripts/cluster.sh nodes` prints them.
#[derive(Debug, Clone)]
struct Node {
    name: String,
    url: String,
}

/// The three nodes; fails the test, saying what to do, unless they all run
/// in one cluster.
fn nodes() -> Vec<Node> {
    let status = CLUSTER.script(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    let nodes: Vec<Node> = CLUSTER
        .sh(&["nodes"])
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, url)| Node {
            name: name.to_owned(),
            url: url.to_owned(),
        })
        .collect();
    let members: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("running in the cluster: "))
        .map(|m| m.split_whitespace().collect())
        .unwrap_or_default();
    assert!(
        status.status.success()
            && nodes.len() == 3
            && nodes.iter().all(|n| members.contains(&n.name.as_str())),
        "these tests need the namespaced cluster: run CLUSTER_NETNS=1 scripts/cluster.sh up \
         first (scripts/test.sh does). Its status says:\n{text}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    nodes
}

/// The nodes' URLs as a list, starting with node `first`, with the test's
/// heartbeat.
fn cluster_url(nodes: &[Node], first: usize) -> String {
    (0..nodes.len())
        .map(|k| {
            format!(
                "{}?heartbeat={HEARTBEAT_SECS}",
                nodes[(first + k) % nodes.len()].url
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Which node an address (as `health().node()` shows it) is.
fn node_index(nodes: &[Node], address: &str) -> Option<usize> {
    nodes.iter().position(|n| {
        let host = n.url.split('@').nth(1).and_then(|r| r.split('/').next());
        host.is_some_and(|h| address.contains(h))
    })
}

/// Undoes every fault, and starts any node that is down, when dropped: the
/// next test finds the cluster whole even when this one failed.
struct Heal;

impl Drop for Heal {
    fn drop(&mut self) {
        let _ = CLUSTER.script(&["heal-all"]);
        let _ = CLUSTER.script(&["up"]);
    }
}

/// Waits (bounded) until all three nodes run in the cluster again.
async fn whole_again(within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let output = CLUSTER.script(&["status"]);
        let text = String::from_utf8_lossy(&output.stdout);
        let members = text
            .lines()
            .find_map(|l| l.strip_prefix("running in the cluster: "))
            .map_or(0, |m| m.split_whitespace().count());
        if members == 3 && !text.contains("starting") {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "the cluster was not whole again within {within:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ---- the consumer ----

/// What each id does: 2% fail permanently (dead-lettered), 5% fail once and
/// 3% twice before they succeed, the rest succeed at once (the orders mix).
fn mixed(id: u64) -> Job {
    match id % 100 {
        0 | 50 => Job::new(id, Fail::Permanent, None),
        1..=5 => Job::new(id, Fail::Transient, Some(1)),
        6..=8 => Job::new(id, Fail::Transient, Some(2)),
        _ => Job::new(id, Fail::None, None),
    }
}

fn expect(id: u64) -> Expect {
    match mixed(id).verdict(u32::MAX) {
        Verdict::Ok => Expect::Handled,
        _ => Expect::DeadLettered,
    }
}

/// Every handler call: id, retry count, when.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<(u64, u32, Instant)>>>);

/// The table the handler writes its effect rows to.
struct Effects {
    table: String,
}

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("dependency unavailable (order {0})")]
    Unavailable(u64),
    #[permanent]
    #[error("order {0} is invalid")]
    Invalid(u64),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// Writes one effect row through the delivery's transaction when the job
/// succeeds at this retry count; fails as the job says otherwise.
#[backoff_consumer(queue = "placeholder", delays = "1s,2s", dedupe = "24h")]
async fn place(
    job: Job,
    ctx: &Context,
    tx: Tx<'_>,
    effects: State<Effects>,
    calls: State<Calls>,
) -> Result<(), OrderError> {
    calls
        .0
        .lock()
        .unwrap()
        .push((job.id, ctx.retry_count(), Instant::now()));
    match job.verdict(ctx.retry_count()) {
        Verdict::Ok => {}
        Verdict::Transient => return Err(OrderError::Unavailable(job.id)),
        Verdict::Permanent => return Err(OrderError::Invalid(job.id)),
    }
    sqlx::query(&format!("INSERT INTO {} (id) VALUES ($1)", effects.table))
        .bind(job.id as i64)
        .execute(&mut *tx.conn().await?)
        .await?;
    Ok(())
}

fn queue_type() -> QueueType {
    match std::env::var("PARTITION_QUEUE_TYPE").as_deref() {
        Err(_) | Ok("quorum") => QueueType::Quorum,
        Ok("classic") => QueueType::Classic,
        Ok(other) => panic!("PARTITION_QUEUE_TYPE is quorum or classic, not {other:?}"),
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// Drops the effect table when dropped.
struct DropTable(String);

impl Drop for DropTable {
    fn drop(&mut self) {
        let table = std::mem::take(&mut self.0);
        let url = stores::postgres_url();
        rabbit_backoff_test_support::cleanup::apart(async move {
            use sqlx::Connection;
            if let Ok(mut conn) = sqlx::PgConnection::connect(&url).await {
                let _ = sqlx::query(&format!("DROP TABLE IF EXISTS {table}"))
                    .execute(&mut conn)
                    .await;
            }
        });
    }
}

// ---- the load ----

/// A publisher sending the orders mix at [`RATE`], each message again (same
/// `message_id`) until the broker confirms it; records what was confirmed.
struct Load {
    confirmed: Arc<Mutex<BTreeMap<u64, Instant>>>,
    /// Publishes that failed and were sent again.
    retries: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl Load {
    fn start(publisher: Arc<Publisher>, spec: &ConsumerSpec, run: &str) -> Load {
        let confirmed = Arc::new(Mutex::new(BTreeMap::new()));
        let retries = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let names = spec.names();
        let run = run.to_owned();
        let task = tokio::spawn({
            let (confirmed, retries, stop) = (confirmed.clone(), retries.clone(), stop.clone());
            async move {
                let mut sends = tokio::task::JoinSet::new();
                let mut tick = tokio::time::interval(Duration::from_millis(1000 / RATE));
                let mut id = 0;
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    while sends.try_join_next().is_some() {}
                    // At most a few seconds' worth waiting for confirms.
                    if sends.len() >= (RATE * 5) as usize {
                        continue;
                    }
                    let (publisher, confirmed, retries) =
                        (publisher.clone(), confirmed.clone(), retries.clone());
                    let (exchange, key) = (names.exchange.clone(), names.routing_key.clone());
                    let message_id = format!("{run}-{id}");
                    let job = mixed(id);
                    sends.spawn(async move {
                        // Bounded: a message never confirmed in time is
                        // simply not in the history.
                        let deadline = Instant::now() + SETTLE;
                        while Instant::now() < deadline {
                            let message = Outgoing::json(&job)
                                .expect("a job encodes")
                                .message_id(message_id.clone());
                            match publisher.publish(&exchange, &key, message).await {
                                Ok(_) => {
                                    confirmed.lock().unwrap().insert(job.id, Instant::now());
                                    return;
                                }
                                Err(_) => {
                                    retries.fetch_add(1, Ordering::Relaxed);
                                    tokio::time::sleep(Duration::from_millis(250)).await;
                                }
                            }
                        }
                    });
                    id += 1;
                }
                while sends.join_next().await.is_some() {}
                id
            }
        });
        Load {
            confirmed,
            retries,
            stop,
            task,
        }
    }

    /// Stops sending new messages, waits for the confirms of those sent;
    /// how many were sent.
    async fn finish(self) -> (u64, BTreeMap<u64, Instant>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let sent = self.task.await.expect("the load does not panic");
        let confirmed = self.confirmed.lock().unwrap().clone();
        (sent, confirmed, self.retries.load(Ordering::Relaxed))
    }
}

// ---- one run ----

/// The faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// A node that neither the consumer nor the publisher is connected to,
    /// cut off from the other two, then healed.
    MinorityCut,
    /// The consumer's node cut off from the clients, not from the cluster.
    ConsumerLink,
    /// The node leading the work queue cut off from the other two.
    WorkQueueLeader,
    /// The node leading the first retry tier cut off from the other two;
    /// with scheduled retries, which have no tier, the node leading the
    /// dead-letter queue, where their failures are copied.
    RetryTierLeader,
    /// The consumer's node, which leads the work queue, cut off from the
    /// other two for long (`PARTITION_LONG_HOLD_SECS`, default 120 s): the
    /// metadata watch must take the consumer to the majority.
    ConsumersNodeLongCut,
    /// Each node stopped in order and started again, one at a time.
    RollingRestart,
    /// The consumer's node's link made slow and lossy: 2 s each way and 10%
    /// of the packets lost with netem; where the kernel has no netem, the
    /// loss alone (`scripts/cluster.sh slow`).
    LossyLink,
}

/// A connection to the first node that answers, starting with `first`.
async fn connect_from(nodes: &[Node], first: usize) -> Connection {
    let mut errors = Vec::new();
    for k in 0..nodes.len() {
        let node = &nodes[(first + k) % nodes.len()];
        match Connection::connect(&node.url, ConnectionProperties::default()).await {
            Ok(connection) => return connection,
            Err(e) => errors.push(format!("{}: {e}", node.name)),
        }
    }
    panic!("no node of the cluster answers ({})", errors.join("; "))
}

/// Takes every message of the dead-letter queue: (id, reason) each.
async fn drain_dead_letters(channel: &lapin::Channel, queue: &str) -> Vec<(u64, Option<String>)> {
    let mut dead = Vec::new();
    while let Some(message) = channel
        .basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap_or_else(|e| panic!("basic.get on {queue}: {e}"))
    {
        let job: Job = serde_json::from_slice(&message.delivery.data).expect("a job");
        let reason = common::header_str(&message.delivery.properties, "x-dead-letter-reason");
        dead.push((job.id, reason));
    }
    dead
}

/// The longest time without a handler call from `from` to the last call
/// before `to` (a run that lost messages waits for them until its deadline:
/// that wait is not a pause in handling).
fn longest_pause(calls: &[(u64, u32, Instant)], from: Instant, to: Instant) -> Duration {
    let mut at: Vec<Instant> = calls
        .iter()
        .map(|c| c.2)
        .filter(|&t| t >= from && t <= to)
        .collect();
    at.sort();
    let mut edges = vec![from];
    edges.extend(at);
    edges
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

/// Handler calls and confirms per second from 5 s before the fault to `to`
/// (`PARTITION_TIMELINE=1` prints it), to see where a pause was.
fn timeline(
    calls: &[(u64, u32, Instant)],
    confirmed: &BTreeMap<u64, Instant>,
    fault_at: Instant,
    to: Instant,
) -> String {
    let start = fault_at - Duration::from_secs(5);
    let seconds = (to.saturating_duration_since(start).as_secs() + 1) as usize;
    let mut handled = vec![0; seconds];
    let mut confirms = vec![0; seconds];
    let slot = |t: Instant| {
        t.checked_duration_since(start)
            .map(|d| d.as_secs() as usize)
            .filter(|&s| s < seconds)
    };
    for &(_, _, at) in calls {
        if let Some(s) = slot(at) {
            handled[s] += 1;
        }
    }
    for &at in confirmed.values() {
        if let Some(s) = slot(at) {
            confirms[s] += 1;
        }
    }
    (0..seconds)
        .map(|s| {
            format!(
                "{:+}s: {} calls, {} confirms",
                s as i64 - 5,
                handled[s],
                confirms[s]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One run of `fault` under load; what the history says.
async fn run(fault: Fault, retry: RetryBackend, round: usize) -> Report {
    let nodes = nodes();
    let _heal = Heal;
    let queue_type = queue_type();
    let hold = Duration::from_secs(
        match fault {
            Fault::ConsumersNodeLongCut => env_or("PARTITION_LONG_HOLD_SECS", "120"),
            _ => env_or("PARTITION_HOLD_SECS", "15"),
        }
        .parse()
        .expect("seconds"),
    );
    snapshotter();

    let mut spec = place.spec();
    spec.queue = unique(&format!("part-{fault:?}").to_lowercase());
    spec.queue_type = Some(queue_type);
    spec.retry = retry;
    spec.prefetch = 50;
    spec.dedupe = Some(Dedupe::new(Duration::from_secs(24 * 3600)));
    let _cleanup = Cleanup::of(&spec).at(&cluster_url(&nodes, 1));
    let _inbox = PgCleanup {
        consumers: vec![spec.queue.clone()],
    };
    let table = format!(
        "rbt_effects_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let _table = DropTable(table.clone());
    {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&stores::postgres_url())
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {}: {e}", stores::postgres_url()));
        sqlx::query(&format!("CREATE TABLE {table} (id BIGINT NOT NULL)"))
            .execute(&mut conn)
            .await
            .expect("the effect table is created");
    }

    if fault == Fault::RetryTierLeader {
        // The work queue led by node a, the consumer's; the retry tiers and
        // the dead-letter queue by node c (a queue's first leader is the
        // node that declared it).
        let connection = rabbit_backoff::connect(&nodes[0].url)
            .await
            .expect("the framework connects to node a");
        connection
            .open_channel()
            .await
            .expect("a channel")
            .declare_queue(&Topology::of(&spec).work_queue)
            .await
            .expect("the work queue is declared");
        connection.close().await;
        let connection = rabbit_backoff::connect(&nodes[2].url)
            .await
            .expect("the framework connects to node c");
        rabbit_backoff::topology::declare_topology(&*connection, &Topology::of(&spec))
            .await
            .expect("the topology is declared");
        connection.close().await;
    }

    // The consumer on node a, the publisher on node b.
    let calls = Calls::default();
    let running: RunningRuntime = {
        let spec = spec.clone();
        Runtime::builder()
            .uri(cluster_url(&nodes, 0))
            .state(calls.clone())
            .state(Effects {
                table: table.clone(),
            })
            .dedupe_store(stores::postgres().await)
            .handle_signals(false)
            .shutdown_grace(Duration::from_secs(5))
            .consumer_with(place, |s| *s = spec)
            .start()
            .await
            .expect("the consumer starts on the cluster")
    };
    let consumer_node = running
        .health()
        .node()
        .and_then(|n| node_index(&nodes, &n))
        .expect("the consumer is connected to a node of the cluster");
    let publisher = Arc::new(
        Publisher::connect(&cluster_url(&nodes, 1))
            .await
            .expect("a publisher connects")
            .with_confirm_timeout(Duration::from_secs(5)),
    );
    let topology = Topology::of(&spec);
    // A quorum queue's leader; a classic queue's node.
    let leader = |queue: &str| -> Option<usize> {
        let name = CLUSTER.sh(&["leader", queue]).trim().to_owned();
        nodes.iter().position(|n| n.name == name)
    };
    let work_leader = leader(&spec.queue);
    // Where failures are copied to: the first tier; with scheduled retries,
    // which have no tier (the work queue holds them back), the dead-letter
    // queue.
    let (failures, failures_queue) = match topology.retry_queues.first() {
        Some(tier) => ("1 s tier", tier.name.clone()),
        None => ("dead-letter queue", spec.names().dead_letter_queue),
    };
    let tier_leader = leader(&failures_queue);
    let load = Load::start(publisher.clone(), &spec, &spec.queue);
    tokio::time::sleep(AROUND).await;

    // The fault.
    let fault_at = Instant::now();
    let target = match fault {
        Fault::MinorityCut => (0..3).find(|&n| n != consumer_node && n != (consumer_node + 1) % 3),
        Fault::ConsumerLink | Fault::LossyLink | Fault::ConsumersNodeLongCut => Some(consumer_node),
        Fault::WorkQueueLeader => Some(work_leader.unwrap_or(consumer_node)),
        Fault::RetryTierLeader => Some(tier_leader.unwrap_or(consumer_node)),
        Fault::RollingRestart => None,
    };
    let mut restarts = Vec::new();
    match fault {
        Fault::ConsumerLink => {
            let node = &nodes[target.expect("a node")].name;
            CLUSTER.sh(&["cut-client", node]);
            tokio::time::sleep(hold).await;
            CLUSTER.sh(&["heal", node]);
        }
        Fault::MinorityCut
        | Fault::WorkQueueLeader
        | Fault::RetryTierLeader
        | Fault::ConsumersNodeLongCut => {
            let node = &nodes[target.expect("a node")].name;
            CLUSTER.sh(&["cut", node]);
            tokio::time::sleep(hold).await;
            CLUSTER.sh(&["heal", node]);
        }
        Fault::LossyLink => {
            let node = &nodes[target.expect("a node")].name;
            CLUSTER.sh(&["slow", node, "2s", "10%"]);
            tokio::time::sleep(hold).await;
            CLUSTER.sh(&["heal", node]);
        }
        Fault::RollingRestart => {
            for node in &nodes {
                let started = Instant::now();
                let name = node.name.clone();
                tokio::task::spawn_blocking(move || CLUSTER.sh(&["restart", &name]))
                    .await
                    .expect("the restart runs");
                restarts.push(started.elapsed());
            }
        }
    }
    let healed_at = Instant::now();
    let rejoined = whole_again(Duration::from_secs(120)).await;
    tokio::time::sleep(AROUND).await;
    let (sent, confirmed, retries) = load.finish().await;

    // Settled: every confirmed message that succeeds has its effect, and
    // the dead-letter queue holds as many as fail for good.
    let expected_ok: Vec<u64> = confirmed
        .keys()
        .copied()
        .filter(|&id| expect(id) == Expect::Handled)
        .collect();
    let expected_dead = confirmed.len() - expected_ok.len();
    let dlq = spec.names().dead_letter_queue;
    let pool = sqlx::PgPool::connect(&stores::postgres_url())
        .await
        .expect("PostgreSQL answers");
    let effect_rows = |pool: sqlx::PgPool, table: String| async move {
        sqlx::query_as::<_, (i64, i64)>(&format!("SELECT id, count(*) FROM {table} GROUP BY id"))
            .fetch_all(&pool)
            .await
            .expect("the effects are read")
    };
    let deadline = Instant::now() + SETTLE;
    let settled_at = loop {
        let effects: HashMap<i64, i64> = effect_rows(pool.clone(), table.clone())
            .await
            .into_iter()
            .collect();
        let done = expected_ok
            .iter()
            .all(|id| effects.contains_key(&(*id as i64)));
        let dead = if done {
            let connection = connect_from(&nodes, 1).await;
            let channel = connection.create_channel().await.expect("a channel");
            let n = depth(&channel, &dlq).await as usize;
            let _ = connection.close(200, "".into()).await;
            n
        } else {
            0
        };
        if done && dead >= expected_dead {
            break Instant::now();
        }
        if Instant::now() > deadline {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    // Late duplicates, if any, have a moment to show.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The dead-letter index of a quorum topology, which the consumer writes
    // beside the queue, describes the queue again after the fault.
    if queue_type == QueueType::Quorum {
        index_heals(&nodes, &spec, &fault).await;
    }

    let mut history = History::default();
    for &id in confirmed.keys() {
        history.confirmed(id, expect(id));
    }
    for (id, n) in effect_rows(pool.clone(), table.clone()).await {
        for _ in 0..n {
            history.effect(id as u64);
        }
    }
    let connection = connect_from(&nodes, 1).await;
    let channel = connection.create_channel().await.expect("a channel");
    for (id, reason) in drain_dead_letters(&channel, &dlq).await {
        history.dead_letter(id, reason);
    }
    let _ = connection.close(200, "".into()).await;
    let calls_seen = calls.0.lock().unwrap().clone();
    for &(id, retry_count, _) in &calls_seen {
        history.call(id, retry_count);
    }
    let report = history.check();
    let skipped = counter("rabbit_backoff_duplicates_skipped_total", &spec.queue);
    let pause = longest_pause(&calls_seen, fault_at, settled_at);
    let name = |n: Option<usize>| n.map_or("-".to_owned(), |n| nodes[n].name.clone());
    let what = match fault {
        Fault::MinorityCut => format!("{} cut from the other nodes for {hold:?}", name(target)),
        Fault::ConsumerLink => format!(
            "the consumer's node {} cut from the clients for {hold:?}",
            name(target)
        ),
        Fault::WorkQueueLeader => format!(
            "the work queue's leader {} cut from the other nodes for {hold:?}",
            name(target)
        ),
        Fault::RetryTierLeader => format!(
            "the {failures}'s leader {} cut from the other nodes for {hold:?}",
            name(target)
        ),
        Fault::ConsumersNodeLongCut => format!(
            "the consumer's node {} cut from the other nodes for {hold:?}",
            name(target)
        ),
        Fault::LossyLink => format!(
            "the consumer's node {} on a slow, lossy link (2 s, 10%) for {hold:?}",
            name(target)
        ),
        Fault::RollingRestart => format!(
            "rolling restart, each node {}",
            restarts
                .iter()
                .map(|d| format!("{:.0} s", d.as_secs_f64()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    eprintln!(
        "partitions, RabbitMQ {}, {:?} queues, retry {retry:?}, {}, run {round}: {what}; consumer started on {}, \
         work queue led by {}, {} by {}: {report}; inbox skipped {skipped} redeliveries; \
         longest pause in handling {:.1} s from the fault; cluster whole {:.1} s after the \
         fault ended; settled {:.1} s after it; {sent} sent, {retries} publishes sent again; \
         consumer now on {}, {} reconnects",
        env_or("RABBITMQ_VERSION", "3.10"),
        queue_type,
        env_or("CLUSTER_PARTITION_HANDLING", "pause_minority"),
        nodes[consumer_node].name,
        name(work_leader),
        failures,
        name(tier_leader),
        pause.as_secs_f64(),
        rejoined.as_secs_f64(),
        (settled_at - healed_at).as_secs_f64(),
        running.health().node().unwrap_or_default(),
        running.health().reconnects(),
    );
    if std::env::var_os("PARTITION_TIMELINE").is_some() {
        eprintln!(
            "{}",
            timeline(&calls_seen, &confirmed, fault_at, settled_at)
        );
    }
    let reconnects = running.health().reconnects();
    let now_on = running.health().node().and_then(|n| node_index(&nodes, &n));
    publisher_close(publisher).await;
    running.stop().await.expect("the runtime stops");
    // On 3.10 (Mnesia) every node's metadata writes block until it notices
    // the lost peer, so the watch seldom decides: with `pause_minority` the
    // node closes its clients once it notices (11–13 s with net_ticktime
    // 10 s, docs/cluster.md), with `autoheal` the consumer waits for the
    // cut to end. The bounds below are 4.x's.
    let khepri = env_or("RABBITMQ_VERSION", "3.10").starts_with('4');
    if fault == Fault::ConsumersNodeLongCut && khepri {
        // The metadata watch notices within 12 s of the majority answering
        // again (at once, or after electing a new metadata leader when the
        // cut node led it: net_ticktime, 10 s here); the reconnection and
        // the topology's declaration take a few seconds more. Without the
        // watch the pause lasts the whole cut. Measured: 7.1 s with the
        // metadata leader elsewhere, 13.1-18.0 s with it on the cut node.
        assert!(
            pause < PAUSE_BOUND && pause < hold,
            "{fault:?}: handling paused {pause:?} in a cut of {hold:?}: the consumer did not \
             leave its node for the majority"
        );
        assert_ne!(
            now_on, target,
            "{fault:?}: the consumer is back on the node it left"
        );
        assert!(
            reconnects <= 2,
            "{fault:?}: {reconnects} reconnects: it should leave once"
        );
    }
    let must_be_clean = queue_type == QueueType::Quorum;
    if must_be_clean {
        assert!(report.is_clean(), "{fault:?}: {report}");
    } else {
        assert!(
            report.duplicate_effects.is_empty(),
            "{fault:?}: the inbox let an effect through twice: {report}"
        );
    }
    assert!(
        report.confirmed > 0,
        "{fault:?}: the broker confirmed nothing"
    );
    report
}

/// After a fault, `dlq groups` counts what the dead-letter queue holds,
/// and within a minute answers from the index (after a pass, when entries
/// were lost with the fault); how many reads and how long, printed.
async fn index_heals(nodes: &[Node], spec: &ConsumerSpec, fault: &Fault) {
    let dlq = Dlq::connect(&cluster_url(nodes, 1), spec)
        .await
        .expect("the operator tools connect");
    let connection = connect_from(nodes, 1).await;
    let started = Instant::now();
    let mut sources = Vec::new();
    loop {
        let report = dlq
            .group_report(&DeadLetterFilter::default())
            .await
            .expect("dlq groups answers");
        let channel = connection.create_channel().await.expect("a channel");
        let held = depth(&channel, &spec.names().dead_letter_queue).await as usize;
        let total: usize = report.groups.iter().map(|g| g.count).sum();
        assert_eq!(
            total, held,
            "{fault:?}: dlq groups counts every dead letter"
        );
        sources.push(format!("{:?}", report.source));
        if report.source == GroupSource::Index {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{fault:?}: the index did not heal within a minute: {sources:?}, last: {}",
            report.reason()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "{fault:?}: the dead-letter index describes the queue again after {} read(s) in {:.1} s \
         ({sources:?})",
        sources.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = connection.close(200, "".into()).await;
    dlq.close().await;
}

async fn publisher_close(publisher: Arc<Publisher>) {
    if let Ok(publisher) = Arc::try_unwrap(publisher) {
        publisher.close().await;
    }
}

/// `PARTITION_REPEATS` runs of `fault`, with retry tiers.
async fn repeat(fault: Fault) {
    repeat_with(fault, RetryBackend::Tiers).await;
}

/// `PARTITION_REPEATS` runs of `fault`, retrying with `retry`. Scheduled
/// retries need RabbitMQ 4.3: on an older cluster the consumer must refuse
/// to start instead.
async fn repeat_with(fault: Fault, retry: RetryBackend) {
    if retry == RetryBackend::Scheduled && !env_or("RABBITMQ_VERSION", "3.10").starts_with("4.3") {
        refuses_scheduled().await;
        return;
    }
    let _serial = SERIAL.lock().await;
    let repeats: usize = env_or("PARTITION_REPEATS", "1")
        .parse()
        .expect("PARTITION_REPEATS is a number");
    for round in 1..=repeats {
        run(fault, retry, round).await;
    }
}

#[tokio::test]
async fn the_minority_node_cut_off_and_healed_loses_nothing_and_doubles_no_effect() {
    repeat(Fault::MinorityCut).await;
}

#[tokio::test]
async fn the_consumers_node_cut_off_from_the_consumer_loses_nothing_and_doubles_no_effect() {
    repeat(Fault::ConsumerLink).await;
}

#[tokio::test]
async fn the_work_queues_leader_partitioned_away_loses_nothing_and_doubles_no_effect() {
    repeat(Fault::WorkQueueLeader).await;
}

#[tokio::test]
async fn a_retry_tiers_leader_partitioned_away_loses_nothing_and_doubles_no_effect() {
    repeat(Fault::RetryTierLeader).await;
}

#[tokio::test]
async fn the_consumers_node_cut_off_for_long_is_left_for_the_majority_and_loses_nothing() {
    repeat(Fault::ConsumersNodeLongCut).await;
}

#[tokio::test]
async fn a_rolling_restart_under_load_loses_nothing_and_doubles_no_effect() {
    repeat(Fault::RollingRestart).await;
}

#[tokio::test]
async fn a_slow_lossy_link_loses_nothing_and_doubles_no_effect() {
    repeat(Fault::LossyLink).await;
}

/// A cluster before 4.3 refuses a consumer with `retry = "scheduled"`,
/// which it would not hold retries back for.
async fn refuses_scheduled() {
    let nodes = nodes();
    let mut spec = place.spec();
    spec.queue = unique("part-scheduled-refused");
    spec.queue_type = Some(QueueType::Quorum);
    spec.retry = RetryBackend::Scheduled;
    spec.dedupe = Some(Dedupe::new(Duration::from_secs(3600)));
    let started = Runtime::builder()
        .uri(cluster_url(&nodes, 0))
        .state(Calls::default())
        .state(Effects {
            table: String::new(),
        })
        .dedupe_store(stores::postgres().await)
        .handle_signals(false)
        .consumer_with(place, |s| *s = spec)
        .start()
        .await;
    assert_scheduled_refused(started);
}

/// With `retry = "scheduled"` (RabbitMQ 4.3, over AMQP 1.0): the consumer's
/// AMQP 1.0 connection is cut from its node as its AMQP 0-9-1 one is.
#[tokio::test]
async fn the_consumers_node_cut_off_from_the_consumer_with_scheduled_retries_loses_nothing() {
    repeat_with(Fault::ConsumerLink, RetryBackend::Scheduled).await;
}

/// With `retry = "scheduled"`: the work queue, which holds the retries
/// back, loses its leader for a while.
#[tokio::test]
async fn the_work_queues_leader_partitioned_away_with_scheduled_retries_loses_nothing() {
    repeat_with(Fault::WorkQueueLeader, RetryBackend::Scheduled).await;
}

/// With `retry = "scheduled"`: a node neither client uses cut off.
#[tokio::test]
async fn the_minority_node_cut_off_with_scheduled_retries_loses_nothing() {
    repeat_with(Fault::MinorityCut, RetryBackend::Scheduled).await;
}

/// With `retry = "scheduled"`: the dead-letter queue, which takes the
/// failures' confirmed copies, loses its leader for a while.
#[tokio::test]
async fn the_dead_letter_queues_leader_partitioned_away_with_scheduled_retries_loses_nothing() {
    repeat_with(Fault::RetryTierLeader, RetryBackend::Scheduled).await;
}

/// With `retry = "scheduled"`: the metadata watch takes both of the
/// consumer's connections, AMQP 0-9-1 and AMQP 1.0, to the majority.
#[tokio::test]
async fn the_consumers_node_cut_off_for_long_with_scheduled_retries_is_left_for_the_majority() {
    repeat_with(Fault::ConsumersNodeLongCut, RetryBackend::Scheduled).await;
}

/// With `retry = "scheduled"`: the retries held back by the work queue
/// survive each node's restart.
#[tokio::test]
async fn a_rolling_restart_with_scheduled_retries_loses_nothing() {
    repeat_with(Fault::RollingRestart, RetryBackend::Scheduled).await;
}

/// With `retry = "scheduled"`: the consumer's links over a slow, lossy
/// network.
#[tokio::test]
async fn a_slow_lossy_link_with_scheduled_retries_loses_nothing() {
    repeat_with(Fault::LossyLink, RetryBackend::Scheduled).await;
}
