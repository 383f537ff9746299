//! Publishing with a plain lapin call, as a hand-written producer or a
//! broker-side fixture publishes: one message, waited for until the broker
//! has taken it, failing the test or bench with where it was sent.

use lapin::options::BasicPublishOptions;
use lapin::{BasicProperties, Channel, Confirmation};

/// Publishes `body` with `properties` to `exchange` with `routing_key`, and
/// waits for the broker's confirm (`NotRequested` on a channel without
/// confirms); fails the test or bench, naming the exchange and key, when
/// the publish or its confirm fails.
pub async fn publish(
    channel: &Channel,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    properties: BasicProperties,
) -> Confirmation {
    publish_with(
        channel,
        exchange,
        routing_key,
        BasicPublishOptions::default(),
        body,
        properties,
    )
    .await
}

/// [`publish`] with `options` (`mandatory`, say).
pub async fn publish_with(
    channel: &Channel,
    exchange: &str,
    routing_key: &str,
    options: BasicPublishOptions,
    body: &[u8],
    properties: BasicProperties,
) -> Confirmation {
    channel
        .basic_publish(
            exchange.into(),
            routing_key.into(),
            options,
            body,
            properties,
        )
        .await
        .unwrap_or_else(|e| panic!("publish to {exchange:?} with key {routing_key:?}: {e}"))
        .await
        .unwrap_or_else(|e| {
            panic!("the confirm of a publish to {exchange:?} with key {routing_key:?}: {e}")
        })
}
