//! [`AmqpTransport`]: a RabbitMQ reached at `amqp://` (or `amqps://`)
//! addresses, one node or a cluster's list, over lapin.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use lapin::uri::AMQPUri;

use super::connection::AmqpConnection;
use super::node_connection::connect_node;
use super::nodes::Nodes;
use crate::transport::connection::Connection;
use crate::transport::net::redact::redact;
use crate::transport::transport::Transport;
use crate::transport::transport_error::TransportError;

/// A RabbitMQ reached at an `amqp://` (or, with the `tls` feature,
/// `amqps://`) address.
///
/// ```
/// use rabbit_backoff::transport::{AmqpTransport, Transport};
///
/// let transport = AmqpTransport::new("amqp://guest:secret@127.0.0.1:5672/%2f");
/// assert_eq!(transport.describe(), "amqp://guest:***@127.0.0.1:5672/%2f");
/// ```
#[derive(Debug, Clone)]
pub struct AmqpTransport {
    /// The nodes to try, shared with the connections made to them.
    nodes: Arc<Nodes>,
}

impl AmqpTransport {
    /// A transport to the broker at `uri`, or to the first node that
    /// answers of a comma-separated list of addresses (a cluster):
    /// `amqp://a:5672/%2f,amqp://b:5672/%2f`.
    pub fn new(uri: impl Into<String>) -> Self {
        let uri = uri.into();
        Self::with_nodes(uri.split(',').map(str::trim).filter(|u| !u.is_empty()))
    }

    /// A transport to the first node of `uris` that answers; after a lost
    /// connection it tries the node it was connected to, then the next ones,
    /// in turn. A node the runtime left for having lost its cluster's
    /// majority ([`Connection::leave`]) is tried after every other, until a
    /// connection to it is made again.
    pub fn with_nodes<I, S>(uris: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let uris = uris.into_iter().map(Into::into).collect();
        AmqpTransport {
            nodes: Arc::new(Nodes::new(uris)),
        }
    }

    /// The same nodes in a random order, so that many instances spread over
    /// a cluster instead of all connecting to its first node.
    pub fn shuffled(self) -> Self {
        let mut uris = self.nodes.uris().to_vec();
        fastrand::shuffle(&mut uris);
        Self::with_nodes(uris)
    }

    /// Connects to the first node that answers, starting from the one of
    /// the last connection, the nodes left for having lost their cluster's
    /// majority ([`Connection::leave`]) last; returns the concrete
    /// connection.
    pub async fn connect_amqp(&self) -> Result<AmqpConnection, TransportError> {
        let uris = self.nodes.uris();
        if uris.is_empty() {
            return Err(TransportError::Other("no broker address given".into()));
        }
        let mut last_error = None;
        for index in self.nodes.order() {
            match connect_node(&uris[index]).await {
                Ok(connected) => {
                    self.nodes.connected(index);
                    let connection = AmqpConnection::new(connected, index, &self.nodes);
                    if uris.len() > 1 {
                        tracing::info!("connected to {}", connection.node());
                    }
                    return Ok(connection);
                }
                Err(e) => {
                    if uris.len() > 1 {
                        tracing::warn!("{} does not answer: {e}", redact(&uris[index]));
                    }
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| TransportError::Other("no broker address given".into())))
    }
}

impl Transport for AmqpTransport {
    fn connect(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>> {
        Box::pin(async move {
            let connection: Arc<dyn Connection> = Arc::new(self.connect_amqp().await?);
            Ok(connection)
        })
    }

    fn describe(&self) -> String {
        self.nodes
            .uris()
            .iter()
            .map(|u| redact(u))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Every node's host and port, in order; an address that does not parse
    /// is left out (connecting to it fails, saying why).
    fn probe_addresses(&self) -> Vec<(String, u16)> {
        self.nodes
            .uris()
            .iter()
            .filter_map(|uri| uri.parse::<AMQPUri>().ok())
            .map(|uri| (uri.authority.host, uri.authority.port))
            .collect()
    }
}
