//! One publish, confirmed: the only way the framework puts a message on the broker.

use std::time::Duration;

use lapin::BasicProperties;

use crate::transport::error::PublishFailure;
use crate::transport::{Channel, Confirm};

/// Publishes with `mandatory` and awaits the broker's confirm of this very
/// message (not of every outstanding one), so concurrent publishes on one
/// channel pipeline. Ok only when the broker acked it and did not return it.
pub(crate) async fn publish_confirmed(
    channel: &dyn Channel,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    properties: BasicProperties,
    timeout: Duration,
) -> Result<(), PublishFailure> {
    let published = channel.publish(exchange, routing_key, body, properties);
    match tokio::time::timeout(timeout, published).await {
        Err(_) => Err(PublishFailure::Timeout(timeout)),
        Ok(Err(e)) => Err(PublishFailure::Channel(e)),
        Ok(Ok(Confirm::Ack)) => Ok(()),
        Ok(Ok(Confirm::Returned)) => Err(PublishFailure::Unroutable),
        Ok(Ok(Confirm::Nack)) => Err(PublishFailure::Nacked),
    }
}
