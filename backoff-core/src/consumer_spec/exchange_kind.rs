//! [`ExchangeKind`]: the type of a consumer's work exchange.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The type of the work exchange.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ExchangeKind {
    /// Routes on an exact routing key (the default).
    #[default]
    Direct,
    /// Routes to every bound queue.
    Fanout,
    /// Routes on routing-key patterns.
    Topic,
    /// Routes on headers.
    Headers,
}

impl ExchangeKind {
    /// The AMQP name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            ExchangeKind::Direct => "direct",
            ExchangeKind::Fanout => "fanout",
            ExchangeKind::Topic => "topic",
            ExchangeKind::Headers => "headers",
        }
    }
}

impl fmt::Display for ExchangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExchangeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "direct" => Ok(ExchangeKind::Direct),
            "fanout" => Ok(ExchangeKind::Fanout),
            "topic" => Ok(ExchangeKind::Topic),
            "headers" => Ok(ExchangeKind::Headers),
            other => Err(format!(
                "unknown exchange type `{other}`; write \"direct\", \"fanout\", \"topic\" or \"headers\""
            )),
        }
    }
}
