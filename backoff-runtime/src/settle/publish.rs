//! One publish, confirmed: the only way the framework puts a message on the broker.

use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;

use crate::transport::{Channel, Confirm, Connection, TransportError};
use crate::{Error, PublishFailure};

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

/// A new channel in confirm mode; errors name `queue`.
pub(crate) async fn confirm_channel(
    connection: &dyn Connection,
    queue: &str,
) -> Result<Arc<dyn Channel>, Error> {
    connection
        .open_channel()
        .await
        .map_err(channel_error(queue, "opening a channel"))
}

/// Maps a transport error to [`Error::Channel`] naming the queue and the action.
pub(crate) fn channel_error(
    queue: &str,
    action: &'static str,
) -> impl FnOnce(TransportError) -> Error {
    let queue = queue.to_owned();
    move |source| Error::Channel {
        action,
        queue,
        source,
    }
}

/// `delivery_mode` of a persistent message.
pub(crate) const PERSISTENT: u8 = 2;
