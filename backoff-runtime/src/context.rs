use std::any::Any;
use std::sync::Arc;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable};

use crate::State;
use crate::state::StateMap;

/// What a handler can know about the delivery it handles, and the shared state
/// registered on the builder.
#[derive(Debug)]
pub struct Context {
    pub(crate) queue: Arc<str>,
    pub(crate) exchange: String,
    pub(crate) routing_key: String,
    pub(crate) redelivered: bool,
    pub(crate) retry_count: u32,
    pub(crate) properties: BasicProperties,
    pub(crate) state: Arc<StateMap>,
}

impl std::fmt::Debug for StateMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateMap")
    }
}

impl Context {
    /// The work queue this delivery came from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The exchange the delivery came through (empty when it returned from a
    /// retry queue through the default exchange).
    pub fn exchange(&self) -> &str {
        &self.exchange
    }

    /// The routing key of the delivery.
    pub fn routing_key(&self) -> &str {
        &self.routing_key
    }

    /// Whether the broker delivered it before (after a crash or a requeue).
    pub fn redelivered(&self) -> bool {
        self.redelivered
    }

    /// How many retry tiers the message has been through: 0 on the first attempt.
    pub fn retry_count(&self) -> u32 {
        self.retry_count
    }

    /// The attempt number: 1 on the first attempt.
    pub fn attempt(&self) -> u32 {
        self.retry_count.saturating_add(1)
    }

    /// The `message_id` property, the key for idempotent handlers.
    pub fn message_id(&self) -> Option<&str> {
        self.properties.message_id().as_ref().map(|s| s.as_str())
    }

    /// The `correlation_id` property.
    pub fn correlation_id(&self) -> Option<&str> {
        self.properties
            .correlation_id()
            .as_ref()
            .map(|s| s.as_str())
    }

    /// Every header of the message.
    pub fn headers(&self) -> Option<&FieldTable> {
        self.properties.headers().as_ref()
    }

    /// One header, when it is a string.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        match self.headers()?.inner().get(name)? {
            AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok(),
            AMQPValue::ShortString(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// All AMQP properties of the message.
    pub fn properties(&self) -> &BasicProperties {
        &self.properties
    }

    /// Shared state of type `T`, if it was registered on the builder.
    pub fn state<T: Any + Send + Sync>(&self) -> Option<State<T>> {
        self.state.get::<T>()
    }
}
