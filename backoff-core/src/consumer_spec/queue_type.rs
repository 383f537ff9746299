//! [`QueueType`]: the kind of queues a consumer declares.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The kind of queues a consumer declares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum QueueType {
    /// Classic queues, for adopting an existing classic topology (such as
    /// the article's). Each lives on one node; TTL dead-lettering from a
    /// retry queue back to the work queue is at-most-once inside the broker.
    Classic,
    /// Quorum queues: what a consumer that names no type declares.
    /// Replicated, with at-least-once dead-lettering from the retry queues
    /// and an explicit delivery limit on the work queue.
    #[default]
    Quorum,
}

impl QueueType {
    /// The attribute value and the `x-queue-type` argument: `classic` or `quorum`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
        }
    }
}

impl FromStr for QueueType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "classic" => Ok(QueueType::Classic),
            "quorum" => Ok(QueueType::Quorum),
            other => Err(format!(
                "unknown queue type `{other}`; write \"classic\" or \"quorum\""
            )),
        }
    }
}
