//! [`ChannelKind`]: which of a connection's two kinds of channel a channel
//! of the in-memory broker is.

/// Which kind of channel a connection opened; the broker behaves the same
/// to both, but for the settlement only a holding channel's deliveries
/// have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChannelKind {
    /// [`Connection::open_channel`](rabbit_backoff_runtime::transport::Connection::open_channel):
    /// in publisher-confirm mode.
    Confirm,
    /// [`Connection::open_holding_channel`](rabbit_backoff_runtime::transport::Connection::open_holding_channel):
    /// its deliveries can also be settled as `modified`, and held back.
    Holding,
}
