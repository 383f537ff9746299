//! How a read of the dead-letter index read its entries.

use serde::Serialize;

/// How a read of the dead-letter index read its entries
/// ([`GroupReport::index_protocol`](crate::GroupReport::index_protocol)).
/// It serializes as `"stream"` or `"amqp"`, as in `dlq groups --json`.
///
/// ```
/// use rabbit_backoff::dead_letters::IndexProtocol;
///
/// assert_eq!(IndexProtocol::Stream.as_str(), "stream protocol");
/// assert_eq!(serde_json::to_string(&IndexProtocol::Amqp)?, r#""amqp""#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
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
