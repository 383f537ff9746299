//! [`ReturnWatch`]: what the probes of the nodes' addresses say about a
//! node coming back.

/// What one probe of a node's address found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeProbe {
    /// The TCP connection was accepted: something listens there.
    Accepted,
    /// Refused, unreachable, unresolvable or timed out: the node is down.
    Refused,
}

/// What the runtime does after a round of probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProbeVerdict {
    /// A node that was down accepts connections again: reconnect now.
    ConnectNow {
        /// Its index in the list of nodes.
        node: usize,
    },
    /// Probe again after a pause.
    Continue,
    /// Nothing left to learn by probing (every node was up from the start,
    /// or there is none): wait out the backoff.
    Stop,
}

/// Decides, between two reconnection attempts, when a broker has come back.
///
/// Only a node seen **down** and then **accepting** counts: that is new,
/// and the full reconnection that follows is worth its cost. A node that
/// accepts from its first probe was up all along (the last attempt failed
/// for another reason: an AMQP refusal, authentication, a connection
/// limit), so connecting to it early would only hammer a broker that said
/// no; it is not probed again until the next wait, and the backoff decides.
/// So a wait costs one accepted TCP connection per node at most, and a
/// down node only refused connects.
///
/// ```
/// use rabbit_backoff::rules::{NodeProbe, ProbeVerdict, ReturnWatch};
///
/// let mut watch = ReturnWatch::new(2);
/// assert_eq!(watch.observe(&[NodeProbe::Refused, NodeProbe::Accepted]), ProbeVerdict::Continue);
/// assert_eq!(watch.to_probe(), vec![0]);
/// assert_eq!(watch.observe(&[NodeProbe::Accepted]), ProbeVerdict::ConnectNow { node: 0 });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnWatch {
    nodes: Vec<Seen>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Not probed yet.
    Unknown,
    /// Refused at least once: its return is what the watch waits for.
    Down,
    /// Accepted at its first probe: not probed again.
    UpAllAlong,
}

impl ReturnWatch {
    /// A watch over `nodes` nodes, none probed yet.
    pub fn new(nodes: usize) -> Self {
        ReturnWatch {
            nodes: vec![Seen::Unknown; nodes],
        }
    }

    /// The nodes to probe in the next round, by index: those not seen up
    /// from the start.
    pub fn to_probe(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, seen)| **seen != Seen::UpAllAlong)
            .map(|(index, _)| index)
            .collect()
    }

    /// Takes the outcomes of a round, one per node of [`to_probe`](Self::to_probe)
    /// in its order (missing outcomes count as not probed), and says what
    /// to do next.
    pub fn observe(&mut self, outcomes: &[NodeProbe]) -> ProbeVerdict {
        let probed = self.to_probe();
        for (index, outcome) in probed.into_iter().zip(outcomes) {
            let seen = &mut self.nodes[index];
            match (*seen, outcome) {
                (Seen::Down, NodeProbe::Accepted) => {
                    return ProbeVerdict::ConnectNow { node: index };
                }
                (_, NodeProbe::Refused) => *seen = Seen::Down,
                (_, NodeProbe::Accepted) => *seen = Seen::UpAllAlong,
            }
        }
        if self.nodes.iter().all(|seen| *seen == Seen::UpAllAlong) {
            ProbeVerdict::Stop
        } else {
            ProbeVerdict::Continue
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use NodeProbe::{Accepted, Refused};

    #[test]
    fn a_node_that_comes_back_is_connected_to_at_once() {
        let mut watch = ReturnWatch::new(1);
        assert_eq!(watch.observe(&[Refused]), ProbeVerdict::Continue);
        assert_eq!(watch.observe(&[Refused]), ProbeVerdict::Continue);
        assert_eq!(
            watch.observe(&[Accepted]),
            ProbeVerdict::ConnectNow { node: 0 }
        );
    }

    #[test]
    fn a_node_up_from_the_start_is_left_to_the_backoff() {
        let mut watch = ReturnWatch::new(1);
        assert_eq!(watch.observe(&[Accepted]), ProbeVerdict::Stop);
        assert!(watch.to_probe().is_empty());
    }

    #[test]
    fn no_node_means_nothing_to_probe() {
        let mut watch = ReturnWatch::new(0);
        assert!(watch.to_probe().is_empty());
        assert_eq!(watch.observe(&[]), ProbeVerdict::Stop);
    }

    #[test]
    fn only_the_nodes_not_up_all_along_are_probed_again() {
        let mut watch = ReturnWatch::new(3);
        assert_eq!(
            watch.observe(&[Accepted, Refused, Refused]),
            ProbeVerdict::Continue
        );
        assert_eq!(watch.to_probe(), vec![1, 2]);
        assert_eq!(
            watch.observe(&[Refused, Accepted]),
            ProbeVerdict::ConnectNow { node: 2 }
        );
    }

    #[test]
    fn missing_outcomes_change_nothing() {
        let mut watch = ReturnWatch::new(2);
        assert_eq!(watch.observe(&[Refused]), ProbeVerdict::Continue);
        assert_eq!(watch.to_probe(), vec![0, 1]);
        assert_eq!(
            watch.observe(&[Refused, Accepted]),
            ProbeVerdict::Continue,
            "node 1 was never seen down"
        );
        assert_eq!(watch.to_probe(), vec![0]);
    }
}
