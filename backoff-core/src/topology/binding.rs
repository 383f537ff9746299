//! [`Binding`]: a queue bound to an exchange.

use serde::{Deserialize, Serialize};

/// A binding of a queue to an exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Binding {
    /// The queue.
    pub queue: String,
    /// The exchange.
    pub exchange: String,
    /// The routing key.
    pub routing_key: String,
}

impl Binding {
    /// The binding of `queue` to `exchange` with `routing_key`.
    ///
    /// ```
    /// use rabbit_backoff::topology::Binding;
    ///
    /// let binding = Binding::new("orders", "orders", "orders.eu");
    /// assert_eq!(binding.routing_key, "orders.eu");
    /// ```
    pub fn new(
        queue: impl Into<String>,
        exchange: impl Into<String>,
        routing_key: impl Into<String>,
    ) -> Self {
        Binding {
            queue: queue.into(),
            exchange: exchange.into(),
            routing_key: routing_key.into(),
        }
    }
}
