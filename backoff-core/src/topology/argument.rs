//! [`Argument`]: a queue or exchange argument's value.

use serde::{Deserialize, Serialize};

/// A queue or exchange argument value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Argument {
    /// An integer argument such as `x-message-ttl`.
    Int(i64),
    /// A string argument such as `x-dead-letter-exchange`.
    Str(String),
}
