//! [`Connection`]: one connection to a broker, which opens channels and
//! says when it is lost.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::{Channel, Lost, TransportError};

/// One connection to a broker.
pub trait Connection: Send + Sync + 'static {
    /// Opens a channel in publisher-confirm mode.
    fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>>;

    /// The negotiated frame size: a message's properties and headers must fit
    /// in one frame of this many bytes.
    fn frame_max(&self) -> u32;

    /// The node it is connected to, for logs and health (no password).
    fn node(&self) -> String {
        String::from("(in memory)")
    }

    /// Watches whether the connection is lost (its socket reset, its node
    /// gone, closed by the broker). Once it is, every operation on it and on
    /// its channels and deliveries fails at once, and consumers' streams
    /// end with an error. The default never reports a loss, for an
    /// implementation whose operations always end by themselves.
    fn lost(&self) -> Lost {
        Lost::never()
    }

    /// Closes the connection; unsettled deliveries of every channel return to
    /// their queues.
    fn close(&self) -> BoxFuture<'_, ()>;
}
