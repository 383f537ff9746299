//! [`Delivery`]: one message delivered or got, with the [`Acker`] that
//! settles it, and [`Deliveries`], one consumer's stream of them.

use std::fmt;

use futures_util::stream::BoxStream;
use lapin::BasicProperties;

use super::acker::Acker;
use super::transport_error::TransportError;

/// Deliveries of one consumer, with its tag for [`Channel::cancel`](super::Channel::cancel). The
/// stream ends when the consumer is cancelled or the channel closes; an
/// error says why it ended abnormally.
#[non_exhaustive]
pub struct Deliveries {
    /// The consumer tag.
    pub consumer_tag: String,
    /// The deliveries, in order.
    pub stream: BoxStream<'static, Result<Delivery, TransportError>>,
}

/// One message delivered to a consumer or got with [`Channel::get`](super::Channel::get).
#[non_exhaustive]
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

impl Deliveries {
    /// The deliveries of the consumer tagged `consumer_tag`, as a transport
    /// hands them over.
    pub fn new(
        consumer_tag: impl Into<String>,
        stream: BoxStream<'static, Result<Delivery, TransportError>>,
    ) -> Self {
        Deliveries {
            consumer_tag: consumer_tag.into(),
            stream,
        }
    }
}

impl Delivery {
    /// A delivery of `data`, settled through `acker`: published to the
    /// default exchange with an empty routing key, without properties, not
    /// redelivered, until the `with_*` methods say otherwise.
    ///
    /// ```
    /// use rabbit_backoff::lapin::BasicProperties;
    /// use rabbit_backoff::transport::{Acker, Delivery, Settle, TransportError};
    /// use futures_util::future::BoxFuture;
    ///
    /// // Settles nothing: a transport's own acker talks to its broker.
    /// struct Unsettled;
    /// impl Settle for Unsettled {
    ///     fn delivery_tag(&self) -> u64 { 1 }
    ///     fn ack(&self, _multiple: bool) -> BoxFuture<'_, Result<(), TransportError>> {
    ///         Box::pin(async { Ok(()) })
    ///     }
    ///     fn nack(&self, _requeue: bool) -> BoxFuture<'_, Result<(), TransportError>> {
    ///         Box::pin(async { Ok(()) })
    ///     }
    ///     fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>> {
    ///         Box::pin(async { Ok(()) })
    ///     }
    /// }
    ///
    /// let delivery = Delivery::new(br#"{"id":7}"#.to_vec(), Acker::new(Unsettled))
    ///     .with_route("orders", "orders.eu")
    ///     .with_properties(BasicProperties::default().with_message_id("order-7".into()))
    ///     .with_redelivered(true);
    /// assert_eq!(delivery.routing_key, "orders.eu");
    /// ```
    pub fn new(data: impl Into<Vec<u8>>, acker: Acker) -> Self {
        Delivery {
            exchange: String::new(),
            routing_key: String::new(),
            redelivered: false,
            properties: BasicProperties::default(),
            data: data.into(),
            acker,
        }
    }

    /// The same delivery, published to `exchange` (empty: the default
    /// exchange) with `routing_key`.
    pub fn with_route(
        mut self,
        exchange: impl Into<String>,
        routing_key: impl Into<String>,
    ) -> Self {
        self.exchange = exchange.into();
        self.routing_key = routing_key.into();
        self
    }

    /// The same delivery, with these properties and headers.
    pub fn with_properties(mut self, properties: BasicProperties) -> Self {
        self.properties = properties;
        self
    }

    /// The same delivery, delivered before and returned unsettled (`true`).
    pub fn with_redelivered(mut self, redelivered: bool) -> Self {
        self.redelivered = redelivered;
        self
    }
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
