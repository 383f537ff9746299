//! [`Confirm`]: what the broker said about one published message, and
//! [`PendingConfirm`], that answer still to come.

use futures_util::future::BoxFuture;

use super::transport_error::TransportError;

/// What the broker said about one published message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirm {
    /// Routed and confirmed.
    Ack,
    /// Refused (`basic.nack`), for example by a full queue with
    /// `x-overflow = reject-publish`.
    Nack,
    /// Returned: no queue is bound for its routing key (`basic.return`).
    Returned,
}

/// The broker's confirmation of a message handed over by [`Channel::send`](super::Channel::send).
pub type PendingConfirm = BoxFuture<'static, Result<Confirm, TransportError>>;
