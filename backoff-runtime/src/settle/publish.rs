//! One publish, confirmed: the only way the framework puts a message on the broker.

use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation, Connection};

use crate::{Error, PublishFailure};

/// Publishes with `mandatory` and awaits the broker's confirm of this very
/// message (not of every outstanding one), so concurrent publishes on one
/// channel pipeline. Ok only when the broker acked it and did not return it.
///
/// The channel must be in confirm mode.
pub(crate) async fn publish_confirmed(
    channel: &Channel,
    exchange: ShortString,
    routing_key: ShortString,
    body: &[u8],
    properties: BasicProperties,
    timeout: Duration,
) -> Result<(), PublishFailure> {
    let confirm = channel
        .basic_publish(
            exchange,
            routing_key,
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            body,
            properties,
        )
        .await
        .map_err(|e| PublishFailure::Channel(Box::new(e)))?;
    match tokio::time::timeout(timeout, confirm).await {
        Err(_) => Err(PublishFailure::Timeout(timeout)),
        Ok(Err(e)) => Err(PublishFailure::Channel(Box::new(e))),
        Ok(Ok(Confirmation::Ack(None))) => Ok(()),
        Ok(Ok(Confirmation::Ack(Some(_)))) => Err(PublishFailure::Unroutable),
        Ok(Ok(Confirmation::Nack(_))) => Err(PublishFailure::Nacked),
        // Only possible on a channel without confirms: never take it as success.
        Ok(Ok(Confirmation::NotRequested)) => Err(PublishFailure::Nacked),
    }
}

/// A new channel in confirm mode; errors name `queue`.
pub(crate) async fn confirm_channel(
    connection: &Connection,
    queue: &str,
) -> Result<Channel, Error> {
    let channel = connection
        .create_channel()
        .await
        .map_err(channel_error(queue, "opening a channel"))?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(channel_error(queue, "enabling publisher confirms"))?;
    Ok(channel)
}

/// Maps a client error to [`Error::Channel`] naming the queue and the action.
pub(crate) fn channel_error(
    queue: &str,
    action: &'static str,
) -> impl FnOnce(lapin::Error) -> Error {
    let queue = queue.to_owned();
    move |source| Error::Channel {
        action,
        queue,
        source,
    }
}

/// `delivery_mode` of a persistent message.
pub(crate) const PERSISTENT: u8 = 2;
