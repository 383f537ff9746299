//! [`RetryReturn`]: where a retry goes when its wait in a retry queue is
//! over.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::exchange_kind::ExchangeKind;
use super::spec_error::SpecError;

/// Where a message goes when its wait in a retry queue is over (the retry
/// queues' `x-dead-letter-exchange` and `x-dead-letter-routing-key`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RetryReturn {
    /// Through the default exchange, straight to the work queue and to no
    /// other queue, whatever the type of the work exchange (the default).
    #[default]
    Queue,
    /// Through the work exchange with the work queue's routing key, as the
    /// article "exponential backoff with RabbitMQ" declares its retry queues.
    /// Adopts such a topology as it stands; refused on a fanout or headers
    /// work exchange, which would deliver every retry to every bound queue.
    Exchange,
}

impl RetryReturn {
    /// The attribute value: `queue` or `exchange`.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryReturn::Queue => "queue",
            RetryReturn::Exchange => "exchange",
        }
    }

    /// Whether this route works with a work exchange of type `kind`: a fanout
    /// or headers exchange ignores the routing key, so returning a retry
    /// through it would deliver the message to every queue bound to it.
    ///
    /// ```
    /// use rabbit_backoff::{ExchangeKind, RetryReturn};
    /// assert!(RetryReturn::Exchange.check(ExchangeKind::Direct).is_ok());
    /// assert!(RetryReturn::Exchange.check(ExchangeKind::Fanout).is_err());
    /// assert!(RetryReturn::Queue.check(ExchangeKind::Fanout).is_ok());
    /// ```
    pub fn check(self, kind: ExchangeKind) -> Result<(), SpecError> {
        match (self, kind) {
            (RetryReturn::Exchange, ExchangeKind::Fanout | ExchangeKind::Headers) => {
                Err(SpecError::RetryReturnBroadcasts { kind })
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for RetryReturn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RetryReturn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "queue" => Ok(RetryReturn::Queue),
            "exchange" => Ok(RetryReturn::Exchange),
            other => Err(format!(
                "`{other}` is not a retry route; write \"queue\" (straight to the work queue, the default) or \"exchange\" (through the work exchange with the work routing key)"
            )),
        }
    }
}
