//! The message annotations of `retry = "scheduled"`
//! ([`RetryBackend::Scheduled`](crate::RetryBackend::Scheduled)): the
//! article's headers, and the broker's delivery time, as AMQP 1.0 message
//! annotations. RabbitMQ keeps an annotation a consumer sets with
//! `modified` only when its key starts with `x-opt-`; an AMQP 0-9-1 reader
//! (the dead-letter tools) sees each as a header of the same name.

/// The retry count: how many retries the message had (`x-retry-count`).
pub const RETRY_COUNT: &str = "x-opt-retry-count";
/// The last failure's error (`x-error`).
pub const ERROR: &str = "x-opt-error";
/// When it was dead-lettered, RFC 3339 (`x-failed-at`).
pub const FAILED_AT: &str = "x-opt-failed-at";
/// Why it was dead-lettered (`x-dead-letter-reason`).
pub const DEAD_LETTER_REASON: &str = "x-opt-reason";
/// When it first failed, RFC 3339 (`x-first-failed-at`).
pub const FIRST_FAILED_AT: &str = "x-opt-first-failed-at";
/// When the queue delivers it again: an AMQP 1.0 timestamp, milliseconds
/// since the Unix epoch (RabbitMQ 4.3).
pub const DELIVERY_TIME: &str = "x-opt-delivery-time";

/// Each annotation with the header that says the same of a message retried
/// by copies: what an operator tool reads a dead letter of either kind by.
pub const AS_HEADERS: [(&str, &str); 5] = [
    (RETRY_COUNT, crate::headers::RETRY_COUNT),
    (ERROR, crate::headers::ERROR),
    (FAILED_AT, crate::headers::FAILED_AT),
    (DEAD_LETTER_REASON, crate::headers::DEAD_LETTER_REASON),
    (FIRST_FAILED_AT, crate::headers::FIRST_FAILED_AT),
];
