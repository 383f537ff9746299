//! [`ReplayOptions`]: where and how fast a replay moves messages, and the
//! edit it makes.

use crate::passes::edit::MessageEdit;

/// Where and how fast [`Dlq::replay`](crate::Dlq::replay) moves messages.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ReplayOptions {
    /// The exchange to publish to (default: the default exchange, which routes
    /// straight to the work queue the message failed in).
    pub to_exchange: Option<String>,
    /// The routing key (default: the work queue the message failed in).
    pub to_routing_key: Option<String>,
    /// At most this many messages a second.
    pub rate: Option<f64>,
    /// Only report what would move.
    pub dry_run: bool,
    /// Who asked, written into each copy's `x-replay-history` entry as
    /// `x-replayed-by`.
    pub by: Option<String>,
    /// A change made to each copy (meant for one message), the original
    /// kept in its history entry.
    pub edit: Option<MessageEdit>,
}

impl ReplayOptions {
    /// Publishes to `exchange` instead of the default exchange.
    ///
    /// ```
    /// use rabbit_backoff::dead_letters::ReplayOptions;
    ///
    /// let options = ReplayOptions::default()
    ///     .to_exchange("orders")
    ///     .to_routing_key("orders.eu")
    ///     .rate(50.0)
    ///     .by("alice");
    /// assert_eq!(options.to_exchange.as_deref(), Some("orders"));
    /// assert!(!options.dry_run);
    /// ```
    pub fn to_exchange(mut self, exchange: impl Into<String>) -> Self {
        self.to_exchange = Some(exchange.into());
        self
    }

    /// Publishes with `routing_key` instead of the work queue's name.
    pub fn to_routing_key(mut self, routing_key: impl Into<String>) -> Self {
        self.to_routing_key = Some(routing_key.into());
        self
    }

    /// Moves at most `per_second` messages a second.
    pub fn rate(mut self, per_second: f64) -> Self {
        self.rate = Some(per_second);
        self
    }

    /// Only reports what would move (`true`), or moves it.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Records `who` asked in each copy's history entry.
    pub fn by(mut self, who: impl Into<String>) -> Self {
        self.by = Some(who.into());
        self
    }

    /// Changes each copy by `edit` (meant for one message).
    pub fn edit(mut self, edit: MessageEdit) -> Self {
        self.edit = Some(edit);
        self
    }
}
