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
/// use rabbit_backoff::rules::{truncate_error, MAX_ERROR_LEN};
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
/// Every dead letter carries the article's three headers, `x-retry-count`
/// (0 included: the contract operators filter the queue on), `x-error` and
/// `x-failed-at`, and the framework's `x-dead-letter-reason` and
/// `x-original-queue`. What the framework adds beyond them leaves out what
/// the others imply, and readers take it back ([`DeadLetter::implied`]):
/// `x-original-exchange` and `x-original-routing-key` equal to
/// `x-original-queue` (the framework's work exchange and binding are named
/// after the queue by default). Every header costs the broker on each
/// message it routes and stores.
///
/// ```
/// use rabbit_backoff::rules::{DeadLetter, DeadLetterReason, HeaderValue};
///
/// let dead_letter = DeadLetter::new(
///     DeadLetterReason::Permanent,
///     "order 7 not found",
///     "2026-01-01T00:00:00.000Z",
/// )
/// .with_origin("orders", "orders", "orders.eu");
/// let headers = dead_letter.headers();
/// assert!(headers.contains(&("x-error", Some(HeaderValue::Str("order 7 not found")))));
/// // Where it came from: the queue, and the routing key that differs from it.
/// assert!(headers.contains(&("x-original-routing-key", Some(HeaderValue::Str("orders.eu")))));
/// assert!(headers.contains(&("x-original-exchange", None)));
/// // No retry tier: a count of 0, written all the same (the article's contract).
/// assert!(headers.contains(&("x-retry-count", Some(HeaderValue::Int(0)))));
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
    /// use rabbit_backoff::rules::{DeadLetter, DeadLetterReason};
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

    /// The headers to write, as name and value: `None` for a header left
    /// out because it holds its [implied](Self::implied) value. A copy
    /// removes a header left out, so that none the original carried says
    /// otherwise.
    pub fn headers(&self) -> [(&'static str, Option<HeaderValue<'a>>); 7] {
        let unless_queue =
            |value: &'a str| (value != self.queue || value.is_empty()).then_some(value);
        [
            (
                headers::RETRY_COUNT,
                Some(HeaderValue::Int(self.retry_count.into())),
            ),
            (headers::ERROR, Some(HeaderValue::Str(self.error))),
            (headers::FAILED_AT, Some(HeaderValue::Str(self.failed_at))),
            (
                headers::DEAD_LETTER_REASON,
                Some(HeaderValue::Str(self.reason.as_str())),
            ),
            (headers::ORIGINAL_QUEUE, Some(HeaderValue::Str(self.queue))),
            (
                headers::ORIGINAL_EXCHANGE,
                unless_queue(self.exchange).map(HeaderValue::Str),
            ),
            (
                headers::ORIGINAL_ROUTING_KEY,
                unless_queue(self.routing_key).map(HeaderValue::Str),
            ),
        ]
    }

    /// The value a dead letter of the framework (one with
    /// `x-dead-letter-reason`) means when it leaves out the header `name`
    /// ([`headers`](Self::headers)): 0 for `x-retry-count` (which dead
    /// letters always carry now; some written before did not), its
    /// `x-original-queue` (`original_queue`) for `x-original-exchange` and
    /// `x-original-routing-key`. `None` for any other header, or without
    /// `x-original-queue`: a copy too large for a frame leaves out all three
    /// `x-original-*` headers, and then where it came from is not known.
    ///
    /// ```
    /// use rabbit_backoff::rules::{DeadLetter, HeaderValue};
    ///
    /// assert_eq!(
    ///     DeadLetter::implied("x-original-routing-key", Some("orders")),
    ///     Some(HeaderValue::Str("orders"))
    /// );
    /// assert_eq!(DeadLetter::implied("x-original-routing-key", None), None);
    /// assert_eq!(DeadLetter::implied("x-retry-count", None), Some(HeaderValue::Int(0)));
    /// assert_eq!(DeadLetter::implied("x-error", Some("orders")), None);
    /// ```
    pub fn implied(name: &str, original_queue: Option<&'a str>) -> Option<HeaderValue<'a>> {
        match name {
            headers::RETRY_COUNT => Some(HeaderValue::Int(0)),
            headers::ORIGINAL_EXCHANGE | headers::ORIGINAL_ROUTING_KEY => original_queue
                .filter(|queue| !queue.is_empty())
                .map(HeaderValue::Str),
            _ => None,
        }
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
            exchange: "",
            routing_key: "orders.eu",
        };
        let h = dl.headers();
        assert!(h.contains(&("x-retry-count", Some(HeaderValue::Int(3)))));
        assert!(h.contains(&("x-dead-letter-reason", Some(HeaderValue::Str("exhausted")))));
        assert!(h.contains(&("x-error", Some(HeaderValue::Str("db down")))));
        assert!(h.contains(&("x-original-queue", Some(HeaderValue::Str("orders")))));
        // The default exchange is not the queue's: written.
        assert!(h.contains(&("x-original-exchange", Some(HeaderValue::Str("")))));
        assert!(h.contains(&(
            "x-original-routing-key",
            Some(HeaderValue::Str("orders.eu"))
        )));
    }

    /// The article's three headers are on every dead letter, whatever its
    /// reason and count: a count of 0 is written, not implied.
    #[test]
    fn every_dead_letter_carries_the_articles_headers() {
        for reason in [
            DeadLetterReason::Permanent,
            DeadLetterReason::Exhausted,
            DeadLetterReason::Decode,
            DeadLetterReason::Oversized,
            DeadLetterReason::Expired,
        ] {
            for count in [0, 1, 7] {
                let dl = DeadLetter::new(reason, "e", "2026-01-01T00:00:00.000Z")
                    .with_retry_count(count)
                    .with_origin("orders", "orders", "orders");
                let h = dl.headers();
                assert!(h.contains(&("x-retry-count", Some(HeaderValue::Int(count.into())))));
                assert!(h.contains(&("x-error", Some(HeaderValue::Str("e")))));
                assert!(h.contains(&(
                    "x-failed-at",
                    Some(HeaderValue::Str("2026-01-01T00:00:00.000Z"))
                )));
            }
        }
    }

    /// What is left out is what a reader implies: reading every header back,
    /// with [`DeadLetter::implied`] for those left out, gives what was
    /// dead-lettered.
    #[test]
    fn what_is_left_out_reads_back_as_implied() {
        for (count, exchange, key) in [
            (0, "orders", "orders"),
            (0, "", "orders"),
            (2, "orders", "orders.eu"),
            (1, "shop", "orders"),
        ] {
            let dl = DeadLetter::new(DeadLetterReason::Permanent, "e", "t")
                .with_retry_count(count)
                .with_origin("orders", exchange, key);
            let written = dl.headers();
            let read = |name: &str| {
                let (_, value) = written.iter().find(|(n, _)| *n == name).unwrap();
                value
                    .clone()
                    .or_else(|| DeadLetter::implied(name, Some("orders")))
            };
            assert_eq!(read("x-retry-count"), Some(HeaderValue::Int(count.into())),);
            assert_eq!(
                read("x-original-exchange"),
                Some(HeaderValue::Str(exchange))
            );
            assert_eq!(read("x-original-routing-key"), Some(HeaderValue::Str(key)));
        }
        let left_out = |count, exchange, key| {
            DeadLetter::new(DeadLetterReason::Permanent, "e", "t")
                .with_retry_count(count)
                .with_origin("orders", exchange, key)
                .headers()
                .iter()
                .filter(|(_, v)| v.is_none())
                .count()
        };
        assert_eq!(
            left_out(0, "orders", "orders"),
            2,
            "the framework's default topology: the origin, never the count"
        );
        assert_eq!(left_out(4, "", "orders.eu"), 0);
        // Without a queue (an empty origin) nothing can be implied from it.
        let no_origin = DeadLetter::new(DeadLetterReason::Decode, "e", "t").headers();
        assert!(no_origin.contains(&("x-original-routing-key", Some(HeaderValue::Str("")))));
    }
}
