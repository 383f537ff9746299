//! Cheap probes of the nodes' addresses between reconnection attempts: a TCP
//! connect, closed at once without a byte of AMQP.
//!
//! To a node that is down this is a refused connect, which costs it nothing;
//! RabbitMQ does not log a connection that closes before sending anything
//! (load balancers' health checks do the same). The decision what to make of
//! the outcomes is [`ReturnWatch`](rabbit_backoff_core::ReturnWatch)'s.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::future::join_all;
use rabbit_backoff_core::NodeProbe;
use tokio::net::TcpStream;

/// How long one probe may take before its node counts as down: a node
/// behind a link that drops packets answers neither yes nor no.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The nodes' addresses, resolved once per wait, so that probing every few
/// hundred milliseconds costs no name lookups.
#[derive(Debug, Clone, Default)]
pub struct ProbeTargets {
    /// Per node, the socket addresses its host name resolved to; empty when
    /// it did not resolve (the node then counts as down).
    nodes: Vec<Vec<SocketAddr>>,
}

impl ProbeTargets {
    /// Resolves each `(host, port)`, in order.
    pub async fn resolve(addresses: &[(String, u16)]) -> Self {
        let lookups = addresses.iter().map(|(host, port)| async move {
            match tokio::net::lookup_host((host.as_str(), *port)).await {
                Ok(found) => found.collect(),
                Err(e) => {
                    tracing::debug!("{host}:{port} does not resolve: {e}");
                    Vec::new()
                }
            }
        });
        ProbeTargets {
            nodes: join_all(lookups).await,
        }
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Probes the nodes at `indices` together; one outcome each, in order.
    pub async fn probe(&self, indices: &[usize]) -> Vec<NodeProbe> {
        join_all(indices.iter().map(|index| async move {
            match self.nodes.get(*index) {
                Some(addresses) => probe_node(addresses).await,
                None => NodeProbe::Refused,
            }
        }))
        .await
    }
}

/// Accepted when one of the node's addresses accepts a TCP connection
/// within [`PROBE_TIMEOUT`]; the connection is closed at once.
async fn probe_node(addresses: &[SocketAddr]) -> NodeProbe {
    for address in addresses {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(address)).await
        {
            drop(stream);
            return NodeProbe::Accepted;
        }
    }
    NodeProbe::Refused
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn a_listening_port_accepts_and_a_closed_one_refuses() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let open = listener.local_addr().expect("address").port();
        let closed = {
            let spare = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            spare.local_addr().expect("address").port()
        };
        let targets =
            ProbeTargets::resolve(&[("127.0.0.1".into(), open), ("localhost".into(), closed)])
                .await;
        assert_eq!(targets.len(), 2);
        assert_eq!(
            targets.probe(&[0, 1, 7]).await,
            vec![NodeProbe::Accepted, NodeProbe::Refused, NodeProbe::Refused],
            "index 7 is no node"
        );
        let unresolved = ProbeTargets {
            nodes: vec![Vec::new()],
        };
        assert_eq!(unresolved.probe(&[0]).await, vec![NodeProbe::Refused]);
    }
}
