//! [`ClassicOnCluster`]: the warning about a consumer on classic queues on a
//! cluster of several nodes, which names the risk and the fix.

use std::collections::HashSet;
use std::fmt;

use crate::QueueType;

/// Why a cluster of several nodes is believed to be there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterEvidence {
    /// The broker address lists this many distinct nodes (host and port):
    /// what the runtime sees, without the management API. One address in
    /// front of a cluster (a load balancer, one DNS name) is not seen.
    Addresses(usize),
    /// The management API reports this many running nodes: what `status`
    /// sees.
    RunningNodes(usize),
}

impl ClusterEvidence {
    /// The evidence of a broker address listing `addresses` (host and port
    /// each): [`Addresses`](Self::Addresses) with the number of distinct
    /// ones, or `None` when it names one node at most.
    ///
    /// ```
    /// use rabbit_backoff_core::ClusterEvidence;
    ///
    /// let node = |port| ("127.0.0.1".to_owned(), port);
    /// assert_eq!(ClusterEvidence::of_addresses(&[node(5673), node(5673)]), None);
    /// assert_eq!(
    ///     ClusterEvidence::of_addresses(&[node(5673), node(5674)]),
    ///     Some(ClusterEvidence::Addresses(2))
    /// );
    /// ```
    pub fn of_addresses(addresses: &[(String, u16)]) -> Option<Self> {
        let distinct = addresses.iter().collect::<HashSet<_>>().len();
        (distinct > 1).then_some(ClusterEvidence::Addresses(distinct))
    }

    /// The evidence of `running` nodes reported by the management API, or
    /// `None` for one node at most.
    pub fn of_running_nodes(running: usize) -> Option<Self> {
        (running > 1).then_some(ClusterEvidence::RunningNodes(running))
    }
}

/// A consumer whose queues are classic, on a cluster of several nodes: a
/// classic queue lives on the node that declared it, so a node cut off or
/// lost loses or strands the messages of its queues (see `docs/cluster.md`).
/// Its [`Display`](fmt::Display) is the warning, naming the risk and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicOnCluster {
    /// The consumer's work queue.
    pub queue: String,
    /// Why a cluster is believed to be there (`status` sees the queues, not
    /// the code).
    pub evidence: ClusterEvidence,
}

impl ClassicOnCluster {
    /// The warning `status` shows for a work queue of type `queue_type` on a
    /// broker showing `evidence`: only for classic queues. Whether the type
    /// was chosen is not known there, so naming `classic` does not silence it.
    pub fn found(
        queue: &str,
        queue_type: QueueType,
        evidence: Option<ClusterEvidence>,
    ) -> Option<Self> {
        let evidence = evidence?;
        (queue_type == QueueType::Classic).then(|| ClassicOnCluster {
            queue: queue.to_owned(),
            evidence,
        })
    }
}

impl fmt::Display for ClassicOnCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let queue = &self.queue;
        match self.evidence {
            ClusterEvidence::Addresses(n) => write!(
                f,
                "the queues of `{queue}` are classic queues and the broker address lists {n} nodes of a cluster"
            )?,
            ClusterEvidence::RunningNodes(n) => write!(
                f,
                "the queues of `{queue}` are classic queues on a cluster of {n} running nodes"
            )?,
        }
        write!(
            f,
            ": a classic queue lives on one node, and its retry tiers and dead-letter queue are classic too, so a node cut off or lost loses or strands the messages in its queues. Drop queue_type = \"classic\" to declare quorum queues, the default, which replicate them on every node (see docs/cluster.md)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_names_the_risk_and_the_fix() {
        let warning = ClassicOnCluster::found(
            "orders",
            QueueType::Classic,
            Some(ClusterEvidence::Addresses(3)),
        )
        .unwrap()
        .to_string();
        for words in [
            "`orders`",
            "3 nodes",
            "lives on one node",
            "retry tiers",
            "loses or strands",
            "quorum queues, the default",
        ] {
            assert!(warning.contains(words), "{words}: {warning}");
        }
    }

    #[test]
    fn quorum_queues_or_a_single_node_are_not_warned_about() {
        let one = [("rabbit".to_owned(), 5672)];
        assert_eq!(ClusterEvidence::of_addresses(&one), None);
        assert_eq!(ClusterEvidence::of_running_nodes(1), None);
        let cluster = ClusterEvidence::of_running_nodes(3);
        assert_eq!(
            ClassicOnCluster::found("orders", QueueType::Quorum, cluster),
            None
        );
        let found = ClassicOnCluster::found("orders", QueueType::Classic, cluster).unwrap();
        assert!(found.to_string().contains("3 running nodes"), "{found}");
    }
}
