//! lapin's errors in the transport's terms: the broker's refusals keep
//! their reply code and words.

use lapin::ErrorKind;

use crate::transport::transport_error::TransportError;

/// A lapin error as a transport error: the broker's refusals keep their
/// reply code and words.
pub(crate) fn transport_error(error: lapin::Error) -> TransportError {
    match error.kind() {
        ErrorKind::ProtocolError(amqp) => TransportError::Refused {
            code: amqp.get_id(),
            text: amqp.get_message().to_string(),
        },
        ErrorKind::InvalidChannelState(..)
        | ErrorKind::InvalidConnectionState(..)
        | ErrorKind::IOError(..)
        | ErrorKind::MissingHeartbeatError => TransportError::Closed(error.to_string()),
        _ => TransportError::Other(error.to_string()),
    }
}
