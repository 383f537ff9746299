//! [`Transport`]: a way to reach a broker, the seam's entry point.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::connection::Connection;
use super::transport_error::TransportError;

/// A way to reach a broker: each call of [`connect`](Transport::connect) is a
/// new connection, as after a reconnect.
pub trait Transport: Send + Sync + 'static {
    /// Opens a connection.
    fn connect(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>>;

    /// Where it connects, for logs and errors, without a password.
    fn describe(&self) -> String;

    /// The host and port of each node, for the cheap TCP probes the runtime
    /// makes between reconnection attempts to notice a node that comes back.
    /// Empty (the default) when there is no socket address to probe, as for
    /// an in-memory broker: the runtime then only follows its backoff.
    fn probe_addresses(&self) -> Vec<(String, u16)> {
        Vec::new()
    }
}

impl<T: Transport + ?Sized> Transport for Arc<T> {
    fn connect(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>> {
        (**self).connect()
    }

    fn describe(&self) -> String {
        (**self).describe()
    }

    fn probe_addresses(&self) -> Vec<(String, u16)> {
        (**self).probe_addresses()
    }
}
