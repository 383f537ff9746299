//! [`TransportError`]: a failure talking to the broker, and the AMQP reply
//! codes the framework tells apart.

use super::tls_error::TlsError;

/// A failure talking to the broker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The broker refused an operation with an AMQP reply code, closing the
    /// channel (or, for a hard error, the connection).
    #[error("{text} (AMQP {code})")]
    Refused {
        /// The reply code: 404 `NOT_FOUND`, 406 `PRECONDITION_FAILED`, …
        code: u16,
        /// The broker's words.
        text: String,
    },
    /// The channel or connection is closed or lost.
    #[error("closed: {0}")]
    Closed(String),
    /// An `amqps://` connection could not be set up: its TLS parameters,
    /// a certificate or key file, or the handshake.
    #[error("{0}")]
    Tls(TlsError),
    /// Anything else the client reports (I/O, protocol, URI).
    #[error("{0}")]
    Other(String),
}

/// `NOT_FOUND`: a passive check or a publish named something that does not exist.
pub const NOT_FOUND: u16 = 404;
/// `RESOURCE_LOCKED`: an exclusive queue held by another connection.
pub const RESOURCE_LOCKED: u16 = 405;
/// `PRECONDITION_FAILED`: a declaration with other arguments than the existing object's.
pub const PRECONDITION_FAILED: u16 = 406;

impl TransportError {
    /// The AMQP reply code of a refusal.
    pub fn code(&self) -> Option<u16> {
        match self {
            TransportError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the broker answered `NOT_FOUND`.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(NOT_FOUND)
    }
}
