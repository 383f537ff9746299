//! [`Connection`]: one connection to a broker, which opens channels and
//! says when it is lost.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use rabbit_backoff_core::BrokerRelease;

use super::channel::Channel;
use super::connection_loss::Lost;
use super::transport_error::TransportError;

/// One connection to a broker.
pub trait Connection: Send + Sync + 'static {
    /// Opens a channel in publisher-confirm mode.
    fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>>;

    /// Opens a channel that only consumes (`qos`, `consume`, `cancel`,
    /// `get`, `close`) and whose deliveries can also be held back: settled
    /// as `modified` ([`Acker::modify`](super::acker::Acker::modify)) with
    /// a time, which the broker holds them until, as the consumers with
    /// `retry = "scheduled"` consume. Declaring and publishing stay on the
    /// channels of [`open_channel`](Connection::open_channel).
    ///
    /// Whatever such channels need is opened when the first is asked for
    /// (over RabbitMQ, an AMQP 1.0 connection to the same node), counts in
    /// this connection's [`lost`](Connection::lost) and closes with it. The
    /// default refuses: this broker holds no delivery back.
    fn open_holding_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
        Box::pin(std::future::ready(Err(TransportError::Other(
            "this connection opens no channel whose deliveries can be held back, as \
             retry = \"scheduled\" consumes"
                .to_owned(),
        ))))
    }

    /// The negotiated frame size: a message's properties and headers must fit
    /// in one frame of this many bytes.
    fn frame_max(&self) -> u32;

    /// The node it is connected to, for logs and health (no password).
    fn node(&self) -> String {
        String::from("(in memory)")
    }

    /// The product and version the node named when the connection opened
    /// (AMQP 0-9-1's `connection.start`), when it named them; `None` by
    /// default.
    fn release(&self) -> Option<BrokerRelease> {
        None
    }

    /// Watches whether the connection is lost (its socket reset, its node
    /// gone, closed by the broker; or what it opened for its
    /// [holding channels](Connection::open_holding_channel) lost). Once it
    /// is, every operation on it and on its channels and deliveries fails at
    /// once, and consumers' streams end with an error. The default never reports a loss, for an
    /// implementation whose operations always end by themselves.
    fn lost(&self) -> Lost {
        Lost::never()
    }

    /// Another node of the cluster that answers a metadata write
    /// ([`Channel::probe_metadata`]) within `timeout`, asked on a connection
    /// of its own, closed after: the node as [`node`](Connection::node)
    /// names it. `None` when none does, or there is no other node (the
    /// default). The metadata watch asks it when this connection's node
    /// stops answering, and leaves the node only when another answers.
    fn majority_elsewhere(&self, timeout: Duration) -> BoxFuture<'_, Option<String>> {
        let _ = timeout;
        Box::pin(std::future::ready(None))
    }

    /// Leaves the node this connection is on, which cannot reach its
    /// cluster's majority (`why` says how that was seen): declares the
    /// connection lost with `why`, so that everything on it fails at once,
    /// closes it, and has its transport try the node that answered
    /// [`majority_elsewhere`](Connection::majority_elsewhere) first and
    /// this one last on its next connect. The default closes it, for a broker with one
    /// node.
    fn leave<'a>(&'a self, why: &'a str) -> BoxFuture<'a, ()> {
        let _ = why;
        self.close()
    }

    /// Closes the connection; unsettled deliveries of every channel return to
    /// their queues.
    fn close(&self) -> BoxFuture<'_, ()>;
}
