//! [`Protocol`]: what a connection to the in-memory broker speaks.

/// What a connection speaks; the broker behaves the same to both, but for
/// the settlements only AMQP 1.0 has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// AMQP 0-9-1 ([`Transport::connect`](rabbit_backoff_runtime::transport::Transport::connect)).
    Amqp091,
    /// AMQP 1.0 ([`Transport::connect_amqp1`](rabbit_backoff_runtime::transport::Transport::connect_amqp1)):
    /// its deliveries can be settled as `modified`.
    Amqp1,
}
