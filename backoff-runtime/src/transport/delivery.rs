//! [`Delivery`]: one message delivered or got, with the [`Acker`] that
//! settles it, and [`Deliveries`], one consumer's stream of them.

use std::fmt;

use futures_util::stream::BoxStream;
use lapin::BasicProperties;

use super::{Acker, TransportError};

/// Deliveries of one consumer, with its tag for [`Channel::cancel`](super::Channel::cancel). The
/// stream ends when the consumer is cancelled or the channel closes; an
/// error says why it ended abnormally.
pub struct Deliveries {
    /// The consumer tag.
    pub consumer_tag: String,
    /// The deliveries, in order.
    pub stream: BoxStream<'static, Result<Delivery, TransportError>>,
}

/// One message delivered to a consumer or got with [`Channel::get`](super::Channel::get).
pub struct Delivery {
    /// The exchange it was published to (empty for the default exchange).
    pub exchange: String,
    /// Its routing key.
    pub routing_key: String,
    /// Whether it was delivered before and returned unsettled.
    pub redelivered: bool,
    /// Its properties and headers.
    pub properties: BasicProperties,
    /// Its body.
    pub data: Vec<u8>,
    /// Settles it.
    pub acker: Acker,
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("exchange", &self.exchange)
            .field("routing_key", &self.routing_key)
            .field("redelivered", &self.redelivered)
            .field("message_id", self.properties.message_id())
            .field("body_len", &self.data.len())
            .finish_non_exhaustive()
    }
}
