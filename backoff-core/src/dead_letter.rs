//! [`DeadLetter`]: the headers a dead-lettered message carries, and why it
//! was dead-lettered ([`DeadLetterReason`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{HeaderValue, headers};

/// The longest `x-error` written, in bytes. Longer errors are cut at a
/// character boundary and marked, so a huge error message or error chain can
/// never push a republish over the broker's frame size.
pub const MAX_ERROR_LEN: usize = 4096;

/// Why a message was dead-lettered (the `x-dead-letter-reason` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// The handler's error was classified permanent.
    Permanent,
    /// Every retry tier was used.
    Exhausted,
    /// The body could not be decoded.
    Decode,
    /// No copy with the message's own headers fits in one frame, and the
    /// broker could not dead-letter it either without pushing it over the
    /// frame size: the copy lists the headers it had to leave out in
    /// `x-dropped-headers`.
    Oversized,
    /// Its first failure is older than the consumer's `max_age`.
    Expired,
}

impl DeadLetterReason {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterReason::Permanent => "permanent",
            DeadLetterReason::Exhausted => "exhausted",
            DeadLetterReason::Decode => "decode",
            DeadLetterReason::Oversized => "oversized",
            DeadLetterReason::Expired => "expired",
        }
    }
}

impl fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Cuts `error` to at most [`MAX_ERROR_LEN`] bytes on a character boundary,
/// saying how much was cut.
///
/// ```
/// use rabbit_backoff::{truncate_error, MAX_ERROR_LEN};
/// assert_eq!(truncate_error("short"), "short");
/// let long = "é".repeat(10_000);
/// let cut = truncate_error(&long);
/// assert!(cut.len() <= MAX_ERROR_LEN);
/// assert!(cut.ends_with("bytes truncated]"));
/// ```
pub fn truncate_error(error: &str) -> String {
    truncate_error_to(error, MAX_ERROR_LEN)
}

/// Room for the marker: "… [12345678901234567890 bytes truncated]".
const MARKER_LEN: usize = 48;

/// Cuts `error` to at most `max` bytes (at least the marker's 48) on a
/// character boundary, saying how much was cut.
///
/// ```
/// use rabbit_backoff_core::truncate_error_to;
/// let cut = truncate_error_to(&"x".repeat(1_000), 300);
/// assert!(cut.len() <= 300);
/// assert!(cut.ends_with("bytes truncated]"));
/// ```
pub fn truncate_error_to(error: &str, max: usize) -> String {
    let max = max.max(MARKER_LEN);
    if error.len() <= max {
        return error.to_owned();
    }
    let mut end = max - MARKER_LEN;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes truncated]", &error[..end], error.len() - end)
}

/// The headers a dead-lettered message carries, on top of all its original
/// headers and properties. It borrows its text, so that a copy's headers are
/// written straight from where the failure was seen.
///
/// ```
/// use rabbit_backoff::{DeadLetter, DeadLetterReason, HeaderValue};
///
/// let dead_letter = DeadLetter::new(
///     DeadLetterReason::Permanent,
///     "order 7 not found",
///     "2026-01-01T00:00:00.000Z",
/// )
/// .with_origin("orders", "orders", "orders");
/// assert!(dead_letter.headers().contains(&("x-error", HeaderValue::Str("order 7 not found"))));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter<'a> {
    /// Why it was dead-lettered.
    pub reason: DeadLetterReason,
    /// The retry tiers it went through (`x-retry-count`).
    pub retry_count: u32,
    /// The error, already bounded by [`truncate_error`].
    pub error: &'a str,
    /// When, RFC 3339 in UTC.
    pub failed_at: &'a str,
    /// The work queue it failed in.
    pub queue: &'a str,
    /// The exchange of the failed delivery.
    pub exchange: &'a str,
    /// The routing key of the failed delivery.
    pub routing_key: &'a str,
}

impl<'a> DeadLetter<'a> {
    /// The dead letter of a message that failed with `error` (already
    /// bounded by [`truncate_error`]) at `failed_at` (RFC 3339 in UTC), for
    /// `reason`; with a retry count of 0 and an empty origin until
    /// [`with_retry_count`](Self::with_retry_count) and
    /// [`with_origin`](Self::with_origin) set them.
    ///
    /// ```
    /// use rabbit_backoff::{DeadLetter, DeadLetterReason};
    ///
    /// let dead_letter = DeadLetter::new(DeadLetterReason::Exhausted, "db down", "2026-01-01T00:00:00Z")
    ///     .with_retry_count(3)
    ///     .with_origin("orders", "orders", "orders.eu");
    /// assert_eq!((dead_letter.retry_count, dead_letter.routing_key), (3, "orders.eu"));
    /// ```
    pub fn new(reason: DeadLetterReason, error: &'a str, failed_at: &'a str) -> Self {
        DeadLetter {
            reason,
            retry_count: 0,
            error,
            failed_at,
            queue: "",
            exchange: "",
            routing_key: "",
        }
    }

    /// The same dead letter, having gone through `retry_count` retry tiers.
    pub fn with_retry_count(mut self, retry_count: u32) -> Self {
        self.retry_count = retry_count;
        self
    }

    /// The same dead letter of a delivery that failed in the work queue
    /// `queue`, published to `exchange` with `routing_key`.
    pub fn with_origin(mut self, queue: &'a str, exchange: &'a str, routing_key: &'a str) -> Self {
        self.queue = queue;
        self.exchange = exchange;
        self.routing_key = routing_key;
        self
    }

    /// The headers to set, as name and value.
    pub fn headers(&self) -> [(&'static str, HeaderValue<'a>); 7] {
        [
            (
                headers::RETRY_COUNT,
                HeaderValue::Int(self.retry_count.into()),
            ),
            (headers::ERROR, HeaderValue::Str(self.error)),
            (headers::FAILED_AT, HeaderValue::Str(self.failed_at)),
            (
                headers::DEAD_LETTER_REASON,
                HeaderValue::Str(self.reason.as_str()),
            ),
            (headers::ORIGINAL_QUEUE, HeaderValue::Str(self.queue)),
            (headers::ORIGINAL_EXCHANGE, HeaderValue::Str(self.exchange)),
            (
                headers::ORIGINAL_ROUTING_KEY,
                HeaderValue::Str(self.routing_key),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn truncation_is_bounded_and_keeps_short_errors(s in "\\PC{0,3000}", repeat in 1usize..6) {
            let error = s.repeat(repeat);
            let cut = truncate_error(&error);
            prop_assert!(cut.len() <= MAX_ERROR_LEN);
            let max = 48 + repeat * 100;
            prop_assert!(truncate_error_to(&error, max).len() <= max);
            if error.len() <= MAX_ERROR_LEN {
                prop_assert_eq!(cut, error);
            } else {
                let kept = cut.split("… [").next().unwrap();
                prop_assert!(error.starts_with(kept));
            }
        }
    }

    #[test]
    fn headers_name_the_reason_and_count() {
        let dl = DeadLetter {
            reason: DeadLetterReason::Exhausted,
            retry_count: 3,
            error: "db down",
            failed_at: "2026-01-01T00:00:00Z",
            queue: "orders",
            exchange: "orders",
            routing_key: "orders",
        };
        let h = dl.headers();
        assert!(h.contains(&("x-retry-count", HeaderValue::Int(3))));
        assert!(h.contains(&("x-dead-letter-reason", HeaderValue::Str("exhausted"))));
        assert!(h.contains(&("x-error", HeaderValue::Str("db down"))));
    }
}
