//! What a delivery's headers say of its past attempts: its retry count
//! (`x-retry-count`, or the broker's `x-delivery-count` with delayed
//! retries) and how long ago it first failed (`x-first-failed-at`), read
//! where the loop reads them.

use std::time::Duration;

use lapin::BasicProperties;
use rabbit_backoff_core::{RetryCount, headers, read_retry_count};

use crate::settle::first_failure::{TierDelays, first_failed_at};
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

/// How long ago the message first failed, from `x-first-failed-at` (or on a
/// first retry copy, which carries none, see [`first_failed_at`]); `tiers`
/// are the consumer's retry queues.
pub(crate) fn since_first_failure(
    properties: &BasicProperties,
    tiers: &TierDelays,
) -> Option<Duration> {
    let first = first_failed_at(properties, tiers)?.time()?;
    Some(wall_clock::now().duration_since(first).unwrap_or_default())
}
