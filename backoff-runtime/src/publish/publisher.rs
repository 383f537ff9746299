//! Publishing typed messages with confirms: [`Publisher`].

use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff_core::ConsumerSpec;
use serde::Serialize;
use tokio::sync::Mutex;

use tracing::Instrument;

use crate::broker::confirm_channel::confirm_channel;
use crate::error::{Error, PublishFailure};
use crate::publish::confirmed::publish_confirmed;
use crate::publish::outgoing::Outgoing;
use crate::telemetry::trace_context::{publish_span, traced};
use crate::transport::AmqpTransport;
use crate::transport::{Channel, Connection, Publication, Transport};

/// Publishes persistent messages and waits for the broker's confirm of each.
///
/// ```no_run
/// # async fn demo() -> Result<(), rabbit_backoff::Error> {
/// use rabbit_backoff::{Outgoing, Publisher};
///
/// let publisher = Publisher::connect("amqp://guest:guest@127.0.0.1:5672/%2f").await?;
/// let id = publisher.publish("orders", "orders", Outgoing::json(&serde_json::json!({"id": 1}))?).await?;
/// println!("published {id}");
/// # Ok(()) }
/// ```
pub struct Publisher {
    transport: Arc<dyn Transport>,
    /// Opened again when the broker closed the channel (for example after a
    /// publish to a missing exchange) or the connection was lost.
    link: Mutex<Link>,
    confirm_timeout: Duration,
}

struct Link {
    connection: Arc<dyn Connection>,
    /// `None` once a publish failed on it: the broker closed it, or the
    /// connection is gone.
    channel: Option<Arc<dyn Channel>>,
}

impl Link {
    async fn open(transport: &dyn Transport) -> Result<Self, Error> {
        let (connection, channel) = Self::connect(transport).await?;
        Ok(Link {
            connection,
            channel: Some(channel),
        })
    }

    async fn connect(
        transport: &dyn Transport,
    ) -> Result<(Arc<dyn Connection>, Arc<dyn Channel>), Error> {
        let connection = transport.connect().await.map_err(|source| Error::Connect {
            uri: transport.describe(),
            source,
        })?;
        let channel = confirm_channel(&*connection, "(publisher)").await?;
        Ok((connection, channel))
    }
}

impl Publisher {
    /// Connects to the broker at `uri` and opens a confirm channel.
    pub async fn connect(uri: &str) -> Result<Self, Error> {
        Self::with_transport(AmqpTransport::new(uri)).await
    }

    /// Connects through `transport` (such as the in-memory broker of
    /// `rabbit_backoff::testing`) and opens a confirm channel.
    pub async fn with_transport(transport: impl Transport) -> Result<Self, Error> {
        let transport: Arc<dyn Transport> = Arc::new(transport);
        let link = Link::open(&*transport).await?;
        Ok(Publisher {
            transport,
            link: Mutex::new(link),
            confirm_timeout: Duration::from_secs(30),
        })
    }

    /// How long to wait for each confirm (default 30 s).
    pub fn with_confirm_timeout(mut self, timeout: Duration) -> Self {
        self.confirm_timeout = timeout;
        self
    }

    /// Publishes with `mandatory` and waits for the confirm. Returns the
    /// message's `message_id`. An unroutable message, a nack, a timeout or a
    /// closed channel is an error: the message was not taken.
    pub async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        message: Outgoing,
    ) -> Result<String, Error> {
        let message_id = message
            .message_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let properties = message.properties(&message_id)?;
        let channel = self.channel().await?;
        // The message carries its publish span's trace context: its handler
        // continues the publisher's trace.
        let span = publish_span(exchange, routing_key);
        let properties = traced(&span, properties);
        let publication = Publication::new(exchange, routing_key, &message.body, properties);
        let published = publish_confirmed(&*channel, publication, self.confirm_timeout)
            .instrument(span)
            .await;
        if let Err(failure) = published {
            if let PublishFailure::Channel(_) | PublishFailure::Nacked = failure {
                // The channel or the connection is gone: open them again next
                // time. After a refusal too: RabbitMQ 3.10 can go on refusing
                // publishes to a quorum queue on a channel that first published
                // to it while its leader moved to another node.
                self.link.lock().await.channel = None;
            }
            return Err(Error::Publish {
                exchange: exchange.to_owned(),
                routing_key: routing_key.to_owned(),
                failure,
            });
        }
        Ok(message_id)
    }

    /// Publishes a JSON payload to a consumer's work exchange with its routing key.
    pub async fn publish_to<T: Serialize + ?Sized>(
        &self,
        spec: &ConsumerSpec,
        payload: &T,
    ) -> Result<String, Error> {
        let names = spec.names();
        self.publish(
            &names.exchange,
            &names.routing_key,
            Outgoing::json(payload)?,
        )
        .await
    }

    /// The confirm channel, opened again when it or the connection was lost
    /// (on the next node that answers, for a cluster's list).
    async fn channel(&self) -> Result<Arc<dyn Channel>, Error> {
        let mut link = self.link.lock().await;
        let lost = link.connection.lost().is_lost();
        if let Some(channel) = &link.channel
            && !lost
        {
            return Ok(Arc::clone(channel));
        }
        let reopened = if lost {
            None
        } else {
            confirm_channel(&*link.connection, "(publisher)").await.ok()
        };
        let channel = match reopened {
            Some(channel) => channel,
            None => {
                // The connection is gone too.
                link.connection.close().await;
                let (connection, channel) = Link::connect(&*self.transport).await?;
                link.connection = connection;
                channel
            }
        };
        link.channel = Some(Arc::clone(&channel));
        Ok(channel)
    }

    /// Closes the channel and the connection.
    pub async fn close(self) {
        let link = self.link.into_inner();
        if let Some(channel) = link.channel {
            channel.close().await;
        }
        link.connection.close().await;
    }
}
