//! [`Publication`]: a message as a channel publishes it, with where it goes.

use lapin::BasicProperties;

/// A message as a channel publishes it (`basic.publish`): the exchange and
/// routing key it goes to, its body and its properties. The application's
/// own messages are [`Outgoing`](crate::Outgoing), which become one. What [`Channel::publish`](super::Channel::publish)
/// and [`Channel::send`](super::Channel::send) take.
///
/// ```
/// use rabbit_backoff::lapin::BasicProperties;
/// use rabbit_backoff::transport::Publication;
///
/// let message = Publication::new("", "orders", br#"{"id":1}"#, BasicProperties::default());
/// assert_eq!(message.routing_key, "orders");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Publication<'a> {
    /// The exchange (`""`: the default exchange, which routes by queue name).
    pub exchange: &'a str,
    /// The routing key.
    pub routing_key: &'a str,
    /// The body, as it goes on the wire.
    pub body: &'a [u8],
    /// The properties, headers included.
    pub properties: BasicProperties,
}

impl<'a> Publication<'a> {
    /// `body` with `properties`, to `exchange` with `routing_key`.
    pub fn new(
        exchange: &'a str,
        routing_key: &'a str,
        body: &'a [u8],
        properties: BasicProperties,
    ) -> Self {
        Publication {
            exchange,
            routing_key,
            body,
            properties,
        }
    }
}
