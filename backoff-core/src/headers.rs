//! Names of the headers the framework reads and writes.

/// How many retry tiers the message has been through (an integer).
pub const RETRY_COUNT: &str = "x-retry-count";
/// Why the message failed: the handler error's `Display`, bounded in size.
pub const ERROR: &str = "x-error";
/// When the message was dead-lettered, RFC 3339 in UTC.
pub const FAILED_AT: &str = "x-failed-at";
/// Why the message was dead-lettered: `permanent`, `exhausted` or `decode`.
pub const DEAD_LETTER_REASON: &str = "x-dead-letter-reason";
/// The work queue the message failed in.
pub const ORIGINAL_QUEUE: &str = "x-original-queue";
/// The exchange of the delivery that failed.
pub const ORIGINAL_EXCHANGE: &str = "x-original-exchange";
/// The routing key of the delivery that failed.
pub const ORIGINAL_ROUTING_KEY: &str = "x-original-routing-key";
