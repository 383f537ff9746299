//! How a read of the dead-letter index read its entries.

/// How a read of the dead-letter index read its entries
/// ([`GroupReport::index_protocol`](crate::GroupReport::index_protocol)).
///
/// ```
/// use rabbit_backoff::dead_letters::IndexProtocol;
///
/// assert_eq!(IndexProtocol::Stream.as_str(), "stream protocol");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IndexProtocol {
    /// RabbitMQ's stream protocol ([`Dlq::stream_protocol`](crate::Dlq::stream_protocol)).
    Stream,
    /// AMQP 0-9-1 (for some or all of its ranges).
    Amqp,
}

impl IndexProtocol {
    /// `stream protocol` or `AMQP`.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexProtocol::Stream => "stream protocol",
            IndexProtocol::Amqp => "AMQP",
        }
    }
}
