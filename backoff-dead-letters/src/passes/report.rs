//! What an operation on dead letters did.

use serde::Serialize;

use crate::message::DeadLetterMessage;

/// What an operation did.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct DeadLetterReport {
    /// The messages it applied to (peeked, replayed, discarded, or that a dry
    /// run would replay).
    pub matched: Vec<DeadLetterMessage>,
    /// The messages left in the dead-letter queue, in their order.
    pub kept: usize,
    /// Matching messages a replay left in the dead-letter queue because no
    /// copy of them can be published, each with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedMessage>,
}

/// A dead letter that a replay could not copy, and stays where it is.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct SkippedMessage {
    /// The message.
    pub message: DeadLetterMessage,
    /// Why no copy could be published.
    pub reason: String,
}
