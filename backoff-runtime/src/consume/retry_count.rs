//! What a delivery's headers say of its past attempts: its retry count
//! (`x-retry-count`, or the broker's `x-delivery-count` with delayed
//! retries) and how long ago it first failed (`x-first-failed-at`), read
//! where the loop reads them.

use std::time::Duration;

use lapin::BasicProperties;
use rabbit_backoff_core::{HeaderValue, RetryCount, headers, parse_failed_at, read_retry_count};

use crate::settle::copy_properties::first_failed_at;
use crate::telemetry::wall_clock;
use crate::transport::amqp_values::header_view;

/// Reads `x-retry-count` from a delivery's properties.
pub fn retry_count_of(properties: &BasicProperties) -> RetryCount {
    count_in(properties, headers::RETRY_COUNT)
}

/// The count in the header `name` (`x-retry-count`, or with delayed retries
/// the broker's `x-delivery-count`), read as tolerantly as `x-retry-count`.
pub(crate) fn count_in(properties: &BasicProperties, name: &str) -> RetryCount {
    let header = properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(name))
        .map(header_view);
    read_retry_count(header.as_ref())
}

/// How long ago the message first failed, from `x-first-failed-at` (or a
/// first retry copy's `x-retried-at`, see [`first_failed_at`]).
pub(crate) fn since_first_failure(properties: &BasicProperties) -> Option<Duration> {
    let HeaderValue::Str(text) = first_failed_at(properties)? else {
        return None;
    };
    let first = parse_failed_at(text)?;
    Some(wall_clock::now().duration_since(first).unwrap_or_default())
}
