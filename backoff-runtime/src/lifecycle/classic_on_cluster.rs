//! The start-up warning about consumers on classic queues they did not
//! choose, when the broker address lists several nodes.

use rabbit_backoff_core::{ClassicOnCluster, ClusterEvidence, ConsumerSpec};

use crate::transport::Transport;

/// Logs one warning for each consumer of `specs` that names no queue type
/// (so it declares classic queues) when the broker address of `transport`
/// lists several distinct nodes, and returns them.
///
/// The several addresses are the evidence of a cluster: RabbitMQ's
/// `connection.start` names no cluster members (its `cluster_name` is the
/// node's own name unless set, and lapin does not hand it on), and the
/// runtime has no management API. One address in front of a cluster (a load
/// balancer, one DNS name for every node) is not seen.
pub(crate) fn warn_classic_on_cluster<'a>(
    transport: &dyn Transport,
    specs: impl IntoIterator<Item = &'a ConsumerSpec>,
) -> Vec<ClassicOnCluster> {
    let evidence = ClusterEvidence::of_addresses(&transport.probe_addresses());
    let warnings: Vec<ClassicOnCluster> = specs
        .into_iter()
        .filter_map(|spec| ClassicOnCluster::unchosen(spec, evidence))
        .collect();
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    warnings
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures_util::future::BoxFuture;
    use rabbit_backoff_core::QueueType;

    use super::*;
    use crate::transport::{Connection, TransportError};

    /// A broker address listing these nodes; it never connects.
    struct Listing(Vec<(String, u16)>);

    impl Transport for Listing {
        fn connect(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>> {
            Box::pin(async { Err(TransportError::Other("not a broker".into())) })
        }

        fn describe(&self) -> String {
            String::from("(a listing)")
        }

        fn probe_addresses(&self) -> Vec<(String, u16)> {
            self.0.clone()
        }
    }

    fn node(port: u16) -> (String, u16) {
        (String::from("127.0.0.1"), port)
    }

    #[test]
    fn only_unnamed_types_on_several_nodes_are_warned_about() {
        let unnamed = ConsumerSpec::new("unnamed", "5s".parse().unwrap());
        let mut classic = ConsumerSpec::new("classic", "5s".parse().unwrap());
        classic.queue_type = Some(QueueType::Classic);
        let mut quorum = ConsumerSpec::new("quorum", "5s".parse().unwrap());
        quorum.queue_type = Some(QueueType::Quorum);
        let specs = [unnamed, classic, quorum];

        let cluster = Listing(vec![node(5673), node(5674), node(5675)]);
        let warned = warn_classic_on_cluster(&cluster, &specs);
        assert_eq!(
            warned.iter().map(|w| w.queue.as_str()).collect::<Vec<_>>(),
            ["unnamed"]
        );
        assert_eq!(warned[0].evidence, ClusterEvidence::Addresses(3));

        let one_node_twice = Listing(vec![node(5672), node(5672)]);
        assert!(warn_classic_on_cluster(&one_node_twice, &specs).is_empty());
    }
}
