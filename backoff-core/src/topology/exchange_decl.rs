//! [`ExchangeDecl`]: an exchange a consumer declares.

use serde::{Deserialize, Serialize};

use crate::ExchangeKind;

/// An exchange the consumer declares (always durable, never auto-deleted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExchangeDecl {
    /// Its name.
    pub name: String,
    /// Its type.
    pub kind: ExchangeKind,
}

impl ExchangeDecl {
    /// The exchange `name`, of type `kind`.
    ///
    /// ```
    /// use rabbit_backoff::ExchangeKind;
    /// use rabbit_backoff::topology::ExchangeDecl;
    ///
    /// let exchange = ExchangeDecl::new("orders", ExchangeKind::Topic);
    /// assert_eq!(exchange.name, "orders");
    /// ```
    pub fn new(name: impl Into<String>, kind: ExchangeKind) -> Self {
        ExchangeDecl {
            name: name.into(),
            kind,
        }
    }
}
