//! A message the application publishes: through the [`Publisher`](crate::Publisher),
//! or through a handler's outbox.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use serde::Serialize;

use crate::error::Error;
use crate::transport::amqp_values::PERSISTENT;

/// A message to publish: a JSON body with its properties.
///
/// ```
/// use rabbit_backoff::Outgoing;
///
/// let message = Outgoing::json(&serde_json::json!({"id": 7}))?
///     .message_id("order-7")
///     .correlation_id("checkout-42")
///     .header("tenant", "acme");
/// # Ok::<(), rabbit_backoff::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub(crate) body: Vec<u8>,
    pub(crate) message_id: Option<String>,
    pub(crate) correlation_id: Option<String>,
    pub(crate) headers: FieldTable,
}

impl Outgoing {
    /// Encodes `payload` as JSON.
    pub fn json<T: Serialize + ?Sized>(payload: &T) -> Result<Self, Error> {
        Ok(Self::raw(serde_json::to_vec(payload)?))
    }

    /// A body as it is (for tests of hostile input, or other encodings).
    pub fn raw(body: impl Into<Vec<u8>>) -> Self {
        Outgoing {
            body: body.into(),
            message_id: None,
            correlation_id: None,
            headers: FieldTable::default(),
        }
    }

    /// Sets `message_id` (default: a new UUID).
    pub fn message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// Sets `correlation_id`.
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// Sets a string header (a name over 255 bytes, which AMQP cannot carry, is ignored).
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        if let Ok(key) = ShortString::try_new(name) {
            self.headers
                .insert(key, AMQPValue::LongString(value.into().into_bytes().into()));
        }
        self
    }

    /// Sets a header of any AMQP type (a name over 255 bytes is ignored).
    pub fn header_value(mut self, name: &str, value: AMQPValue) -> Self {
        if let Ok(key) = ShortString::try_new(name) {
            self.headers.insert(key, value);
        }
        self
    }
}

impl Outgoing {
    /// Its properties, persistent, with `message_id` set to `message_id`.
    pub(crate) fn properties(&self, message_id: &str) -> Result<BasicProperties, Error> {
        let mut properties = BasicProperties::default()
            .with_delivery_mode(PERSISTENT)
            .with_content_type("application/json".into())
            .with_message_id(short(message_id, "message_id")?)
            .with_headers(self.headers.clone());
        if let Some(id) = &self.correlation_id {
            properties = properties.with_correlation_id(short(id, "correlation_id")?);
        }
        Ok(properties)
    }
}

/// A short string, or an error naming what was too long.
fn short(s: &str, what: &'static str) -> Result<ShortString, Error> {
    ShortString::try_new(s).map_err(|_| Error::TooLong { what, len: s.len() })
}
