//! What a delivery's headers say of its past attempts: its retry count
//! (`x-retry-count`, or the broker's `x-delivery-count` with delayed
//! retries), read where the loop reads it. How long ago it first failed is
//! the executor's to say, which knows the consumer's tiers.

use lapin::BasicProperties;
use rabbit_backoff_core::{RetryCount, headers, read_retry_count};

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
