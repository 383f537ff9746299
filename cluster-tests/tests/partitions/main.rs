//! Network faults on a three-node RabbitMQ cluster whose nodes are hosts of
//! their own (network namespaces on a bridge: `CLUSTER_NETNS=1
//! scripts/cluster.sh up`), under a steady load of the orders mix, checked
//! by a history of what the broker confirmed (the root's tests/common/history.rs):
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
//! In the crate of the cluster tests, left out of the workspace's default
//! members: `cargo test --workspace --test partitions -- --nocapture`
//! (scripts/test.sh runs
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
//!
//! The files: `nodes` (the namespaced cluster), `consumer` (the handler and
//! its effect table), `load` (the publisher), `fault` (each fault, inflicted
//! and described), `calls` (the handler's calls over time), `run` (one run
//! of a fault, checked), `index` (the dead-letter index after it).

// What the root's integration tests share: the broker, names, cleanup, the
// PostgreSQL store, counters and the history checker.
#[path = "../../../tests/common/mod.rs"]
mod common;
#[path = "../../../tests/common/counters.rs"]
mod counters;
#[path = "../../../tests/common/history.rs"]
mod history;

mod calls;
mod consumer;
mod fault;
mod index;
mod load;
mod nodes;
mod run;

use std::time::Duration;

use common::stores;
use common::{assert_scheduled_refused, unique};
use consumer::{Calls, Effects, env_or, place};
use fault::Fault;
use nodes::{cluster_url, nodes};
use rabbit_backoff::prelude::*;
use rabbit_backoff::{Dedupe, QueueType, RetryBackend};
use rabbit_backoff_cluster_tests::cluster_script::Cluster;

/// The cluster these tests drive.
pub(crate) const CLUSTER: Cluster = Cluster::Netns;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
        run::run(fault, retry, round).await;
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
