//! The faults a run inflicts on the cluster: which node each strikes, how
//! it is inflicted and healed, and how the run's report names it.

use std::time::Duration;

use tokio::time::Instant;

use crate::CLUSTER;
use crate::nodes::Node;

/// The faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
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

impl Fault {
    /// The node the fault strikes, given the consumer's node and the
    /// leaders of the work queue and of where failures are copied; `None`
    /// for a rolling restart, which strikes each in turn.
    pub(crate) fn target(
        self,
        consumer_node: usize,
        work_leader: Option<usize>,
        tier_leader: Option<usize>,
    ) -> Option<usize> {
        match self {
            Fault::MinorityCut => {
                (0..3).find(|&n| n != consumer_node && n != (consumer_node + 1) % 3)
            }
            Fault::ConsumerLink | Fault::LossyLink | Fault::ConsumersNodeLongCut => {
                Some(consumer_node)
            }
            Fault::WorkQueueLeader => Some(work_leader.unwrap_or(consumer_node)),
            Fault::RetryTierLeader => Some(tier_leader.unwrap_or(consumer_node)),
            Fault::RollingRestart => None,
        }
    }

    /// Inflicts the fault on `target` for `hold`, then heals it; the time
    /// each node's restart took, for a rolling restart.
    pub(crate) async fn inflict(
        self,
        nodes: &[Node],
        target: Option<usize>,
        hold: Duration,
    ) -> Vec<Duration> {
        let mut restarts = Vec::new();
        match self {
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
                for node in nodes {
                    let started = Instant::now();
                    let name = node.name.clone();
                    tokio::task::spawn_blocking(move || CLUSTER.sh(&["restart", &name]))
                        .await
                        .expect("the restart runs");
                    restarts.push(started.elapsed());
                }
            }
        }
        restarts
    }

    /// What the run did, for its report line: the fault, the node it struck
    /// (`name(target)`), where failures go, and the restarts' times.
    pub(crate) fn describe(
        self,
        target: &str,
        failures: &str,
        hold: Duration,
        restarts: &[Duration],
    ) -> String {
        match self {
            Fault::MinorityCut => format!("{target} cut from the other nodes for {hold:?}"),
            Fault::ConsumerLink => {
                format!("the consumer's node {target} cut from the clients for {hold:?}")
            }
            Fault::WorkQueueLeader => {
                format!("the work queue's leader {target} cut from the other nodes for {hold:?}")
            }
            Fault::RetryTierLeader => {
                format!("the {failures}'s leader {target} cut from the other nodes for {hold:?}")
            }
            Fault::ConsumersNodeLongCut => {
                format!("the consumer's node {target} cut from the other nodes for {hold:?}")
            }
            Fault::LossyLink => format!(
                "the consumer's node {target} on a slow, lossy link (2 s, 10%) for {hold:?}"
            ),
            Fault::RollingRestart => format!(
                "rolling restart, each node {}",
                restarts
                    .iter()
                    .map(|d| format!("{:.0} s", d.as_secs_f64()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}
