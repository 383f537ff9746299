//! The keys `#[backoff_consumer]` accepts.

/// Every key `#[backoff_consumer(…)]` accepts, in the order its help lists
/// them. The attribute refuses any other key at compile time; the book's key
/// table (docs/attributes.md) and the attribute's documentation list exactly
/// these (a test holds all three together).
///
/// ```
/// assert!(rabbit_backoff::ATTRIBUTE_KEYS.contains(&"delays"));
/// ```
pub const ATTRIBUTE_KEYS: &[&str] = &[
    "queue",
    "delays",
    "prefetch",
    "concurrency",
    "exchange",
    "exchange_type",
    "routing_key",
    "retry_exchange",
    "retry_queue",
    "dead_letter_exchange",
    "dead_letter_queue",
    "dead_letter_routing_key",
    "retry_return",
    "queue_type",
    "delivery_limit",
    "timeout",
    "declare",
    "jitter",
    "max_age",
    "immediate",
    "breaker",
    "dedupe",
    "dedupe_key",
    "retry",
    "dead_letter_index",
    "crate",
];
