//! [`MetadataWatch`]: noticing that the node a connection is on has lost its
//! cluster's majority, and [`connect_order`]: which node to try after
//! leaving it.
//!
//! On RabbitMQ 4.x the metadata (queues, exchanges, bindings) lives in
//! Khepri, a Raft store: a node cut off from the majority keeps its client
//! connections, its heartbeats and its reads (a passive declare answers at
//! once, from its stale copy), but a metadata write (declaring a queue)
//! gets no answer as long as the cut lasts. The runtime makes such a write
//! every [`interval`](MetadataWatch::interval), bounded by
//! [`timeout`](MetadataWatch::timeout). After [`misses`](MetadataWatch::misses)
//! writes in a row without an answer it asks another node the same, on a
//! connection of its own: only when another node answers has this one lost
//! the majority. When none does, the cluster as a whole cannot write: a cut
//! that took the metadata store's leader away blocks the majority's writes
//! too until it has elected another (RabbitMQ notices the lost node after
//! its `net_ticktime`), and leaving would only move to a node that answers
//! no better.

use std::time::Duration;

/// How the runtime watches that its node still reaches the cluster's
/// majority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetadataWatch {
    /// The pause between two probes that were answered.
    pub interval: Duration,
    /// How long one probe may wait for its answer.
    pub timeout: Duration,
    /// How many probes in a row without an answer send the watch to ask
    /// another node (at least 1). A probe that is unanswered is followed at
    /// once by the next, on a new channel.
    pub misses: u32,
}

impl MetadataWatch {
    /// Probes every `interval`, each given `timeout`, leaving after
    /// `misses` in a row without an answer (at least 1).
    pub fn new(interval: Duration, timeout: Duration, misses: u32) -> Self {
        MetadataWatch {
            interval,
            timeout,
            misses: misses.max(1),
        }
    }

    /// How much longer this node's probe is given than the other nodes',
    /// when they are asked together.
    pub const GRACE: Duration = Duration::from_secs(1);

    /// The longest time from the node losing the majority to the watch
    /// saying so, while another node answers: a pause, `misses` probes
    /// timing out, then the other nodes asked while this one is probed
    /// once more (a timeout and [`GRACE`](Self::GRACE)).
    pub fn notices_within(&self) -> Duration {
        self.interval + self.timeout * (self.misses + 1) + Self::GRACE
    }
}

impl Default for MetadataWatch {
    /// A probe every 2 s, each given 3 s, two unanswered in a row before
    /// asking the other nodes: noticed within 12 s.
    fn default() -> Self {
        MetadataWatch::new(Duration::from_secs(2), Duration::from_secs(3), 2)
    }
}

/// What one probe got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetadataProbe {
    /// The write was answered (done and undone).
    Answered,
    /// The broker refused it (a closed channel, an error): an answer, so
    /// the node reaches the majority; not the signal.
    Refused,
    /// No answer within the timeout.
    NoAnswer,
}

/// What the watch does after a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchVerdict {
    /// Wait the interval, then probe again.
    Wait,
    /// Probe again at once, on a new channel (the old one still waits for
    /// its answer).
    ProbeAgain,
    /// Probe another node, on a connection of its own: whether it answers
    /// decides ([`MissCounter::elsewhere`]).
    AskElsewhere,
    /// The node has lost the majority: leave it.
    Leave,
}

/// Counts the probes in a row without an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissCounter {
    limit: u32,
    missed: u32,
}

impl MissCounter {
    /// A counter for `watch`'s [`misses`](MetadataWatch::misses).
    pub fn new(watch: &MetadataWatch) -> Self {
        MissCounter {
            limit: watch.misses.max(1),
            missed: 0,
        }
    }

    /// How many probes in a row got no answer.
    pub fn missed(&self) -> u32 {
        self.missed
    }

    /// Takes one probe's outcome into account.
    pub fn observe(&mut self, probe: MetadataProbe) -> WatchVerdict {
        match probe {
            MetadataProbe::Answered | MetadataProbe::Refused => {
                self.missed = 0;
                WatchVerdict::Wait
            }
            MetadataProbe::NoAnswer => {
                self.missed = self.missed.saturating_add(1);
                if self.missed >= self.limit {
                    WatchVerdict::AskElsewhere
                } else {
                    WatchVerdict::ProbeAgain
                }
            }
        }
    }
}

/// The order in which to try `nodes` nodes, from `start` (the node of the
/// last connection) on, in turn: every node not `left` first, then those
/// that were left for having lost the majority, in their turn. Indices out
/// of `left` count as not left.
pub fn connect_order(nodes: usize, start: usize, left: &[bool]) -> Vec<usize> {
    if nodes == 0 {
        return Vec::new();
    }
    let turn = (0..nodes).map(|step| (start % nodes + step) % nodes);
    let was_left = |node: &usize| left.get(*node).copied().unwrap_or(false);
    turn.clone()
        .filter(|n| !was_left(n))
        .chain(turn.filter(was_left))
        .collect()
}

impl MissCounter {
    /// What the other nodes' probe and a probe of this node made at the
    /// same time say, after [`AskElsewhere`](WatchVerdict::AskElsewhere).
    /// Another node answered and this one did not (given a little longer):
    /// this node has lost the majority. Both answered: the cluster has just
    /// elected its metadata store's leader, stay. Neither did (or there is
    /// no other node): the cluster cannot write anywhere, stay and probe
    /// again (each further miss asks again).
    pub fn elsewhere(&mut self, other_answered: bool, this_node: MetadataProbe) -> WatchVerdict {
        match (other_answered, this_node) {
            (true, MetadataProbe::NoAnswer) => WatchVerdict::Leave,
            (_, MetadataProbe::NoAnswer) => WatchVerdict::ProbeAgain,
            (_, answered) => self.observe(answered),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_default_notices_within_twelve_seconds() {
        let watch = MetadataWatch::default();
        assert_eq!(watch.notices_within(), Duration::from_secs(12));
        assert_eq!(
            MetadataWatch::new(watch.interval, watch.timeout, 0).misses,
            1
        );
    }

    #[test]
    fn only_misses_in_a_row_leave() {
        let mut counter = MissCounter::new(&MetadataWatch::default());
        assert_eq!(
            counter.observe(MetadataProbe::NoAnswer),
            WatchVerdict::ProbeAgain
        );
        assert_eq!(counter.observe(MetadataProbe::Answered), WatchVerdict::Wait);
        assert_eq!(counter.missed(), 0);
        assert_eq!(
            counter.observe(MetadataProbe::NoAnswer),
            WatchVerdict::ProbeAgain
        );
        assert_eq!(
            counter.observe(MetadataProbe::NoAnswer),
            WatchVerdict::AskElsewhere
        );
        assert_eq!(
            counter.elsewhere(false, MetadataProbe::NoAnswer),
            WatchVerdict::ProbeAgain
        );
        assert_eq!(
            counter.observe(MetadataProbe::NoAnswer),
            WatchVerdict::AskElsewhere,
            "still missing: asks again"
        );
        assert_eq!(
            counter.elsewhere(true, MetadataProbe::Answered),
            WatchVerdict::Wait,
            "both answer: an election just ended"
        );
        assert_eq!(counter.missed(), 0);
        counter.observe(MetadataProbe::NoAnswer);
        counter.observe(MetadataProbe::NoAnswer);
        assert_eq!(
            counter.elsewhere(true, MetadataProbe::NoAnswer),
            WatchVerdict::Leave
        );
    }

    #[test]
    fn a_refusal_is_an_answer() {
        let mut counter = MissCounter::new(&MetadataWatch::default());
        counter.observe(MetadataProbe::NoAnswer);
        assert_eq!(counter.observe(MetadataProbe::Refused), WatchVerdict::Wait);
        assert_eq!(
            counter.observe(MetadataProbe::NoAnswer),
            WatchVerdict::ProbeAgain
        );
    }

    #[test]
    fn a_node_left_is_tried_last() {
        assert_eq!(connect_order(3, 2, &[false, false, true]), vec![0, 1, 2]);
        assert_eq!(connect_order(3, 0, &[true, false, false]), vec![1, 2, 0]);
        assert_eq!(connect_order(3, 1, &[true, true, false]), vec![2, 1, 0]);
        assert_eq!(connect_order(3, 1, &[]), vec![1, 2, 0]);
        assert_eq!(connect_order(0, 0, &[true]), Vec::<usize>::new());
        assert_eq!(connect_order(1, 0, &[true]), vec![0]);
    }

    proptest! {
        #[test]
        fn every_node_is_tried_once(
            nodes in 0usize..8,
            start in 0usize..20,
            left in proptest::collection::vec(any::<bool>(), 0..10),
        ) {
            let mut order = connect_order(nodes, start, &left);
            let unleft_first = order
                .iter()
                .position(|n| left.get(*n).copied().unwrap_or(false))
                .is_none_or(|first_left| {
                    order[first_left..].iter().all(|n| left.get(*n).copied().unwrap_or(false))
                });
            prop_assert!(unleft_first);
            order.sort();
            prop_assert_eq!(order, (0..nodes).collect::<Vec<_>>());
        }
    }
}
