//! [`Context`]: what a handler can know about the delivery it handles (its
//! queue, attempt, headers) and the shared state, and [`ContextBuilder`] for tests.

use std::any::Any;
use std::sync::Arc;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};

use crate::consume::state::{State, StateMap};
use crate::transport::header_view;
use rabbit_backoff_core::HeaderValue;

/// What a handler can know about the delivery it handles, and the shared state
/// registered on the builder.
///
/// For unit tests of a handler, without a broker, build one with
/// [`Context::builder`]:
///
/// ```
/// use rabbit_backoff::Context;
///
/// struct Db;
/// let ctx = Context::builder("orders")
///     .retry_count(2)
///     .message_id("m-1")
///     .header("tenant", "acme")
///     .state(Db)
///     .build();
/// assert_eq!(ctx.attempt(), 3);
/// assert_eq!(ctx.header_str("tenant"), Some("acme"));
/// assert!(ctx.state::<Db>().is_some());
/// ```
#[derive(Debug)]
pub struct Context {
    pub(crate) queue: Arc<str>,
    pub(crate) exchange: String,
    pub(crate) routing_key: String,
    pub(crate) redelivered: bool,
    pub(crate) retry_count: u32,
    pub(crate) properties: BasicProperties,
    pub(crate) state: Arc<StateMap>,
    /// The transaction of the delivery's inbox claim, on a transactional store.
    #[cfg(feature = "postgres")]
    pub(crate) transaction: Option<Arc<crate::dedupe::Transaction>>,
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

    /// The exchange the delivery came through: empty when it returned from a
    /// retry queue through the default exchange; with `retry = "delayed"` or
    /// `"scheduled"`, a retry comes back as the broker holds it, through the
    /// exchange it was first published to (over AMQP 1.0, `"scheduled"`,
    /// RabbitMQ 4.3 also gives every delivery `x-exchange` and
    /// `x-routing-key` headers).
    pub fn exchange(&self) -> &str {
        &self.exchange
    }

    /// The routing key of the delivery.
    pub fn routing_key(&self) -> &str {
        &self.routing_key
    }

    /// Whether the broker delivered it before: after a crash or a requeue, and
    /// on every retry of `retry = "delayed"` or `"scheduled"`, which the
    /// broker holds back and delivers again (read [`retry_count`](Self::retry_count)
    /// to tell a retry from a redelivery).
    pub fn redelivered(&self) -> bool {
        self.redelivered
    }

    /// How many times the message failed before this attempt: 0 on the first.
    /// Read from the header of the consumer's retry backend: `x-retry-count`
    /// (retry tiers), `x-delivery-count` (`"delayed"`) or `x-opt-retry-count`
    /// (`"scheduled"`).
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

    /// One header, when it is an integer of any AMQP width that fits an
    /// `i64`: RabbitMQ writes `x-delivery-count` and the `x-opt-` annotations
    /// as 64-bit integers, other publishers use any width.
    ///
    /// ```
    /// use rabbit_backoff::Context;
    ///
    /// let ctx = Context::builder("orders").header_int("x-opt-retry-count", 2).build();
    /// assert_eq!(ctx.header_int("x-opt-retry-count"), Some(2));
    /// assert_eq!(ctx.header_int("missing"), None);
    /// ```
    pub fn header_int(&self, name: &str) -> Option<i64> {
        match header_view(self.headers()?.inner().get(name)?) {
            HeaderValue::Int(n) => i64::try_from(n).ok(),
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

impl Context {
    /// A context for unit tests of a handler: call the consumer's
    /// `handle(message, &ctx)` directly, no broker needed.
    pub fn builder(queue: &str) -> ContextBuilder {
        ContextBuilder {
            context: Context {
                queue: Arc::from(queue),
                exchange: queue.to_owned(),
                routing_key: queue.to_owned(),
                redelivered: false,
                retry_count: 0,
                properties: BasicProperties::default(),
                state: Arc::new(StateMap::default()),
                #[cfg(feature = "postgres")]
                transaction: None,
            },
            headers: FieldTable::default(),
            state: StateMap::default(),
        }
    }
}

/// Builds a [`Context`] for tests. Made by [`Context::builder`].
#[must_use = "call .build()"]
pub struct ContextBuilder {
    context: Context,
    headers: FieldTable,
    state: StateMap,
}

impl ContextBuilder {
    /// How many times the message failed before.
    pub fn retry_count(mut self, count: u32) -> Self {
        self.context.retry_count = count;
        self
    }

    /// The `message_id` property (at most 255 bytes; longer ones are ignored).
    pub fn message_id(mut self, id: &str) -> Self {
        if let Ok(id) = ShortString::try_new(id) {
            self.context.properties = self.context.properties.with_message_id(id);
        }
        self
    }

    /// The `correlation_id` property (at most 255 bytes; longer ones are ignored).
    pub fn correlation_id(mut self, id: &str) -> Self {
        if let Ok(id) = ShortString::try_new(id) {
            self.context.properties = self.context.properties.with_correlation_id(id);
        }
        self
    }

    /// A string header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let Ok(name) = ShortString::try_new(name) {
            self.headers
                .insert(name, AMQPValue::LongString(value.as_bytes().into()));
        }
        self
    }

    /// An integer header, as the broker writes them (a 64-bit integer).
    pub fn header_int(mut self, name: &str, value: i64) -> Self {
        if let Ok(name) = ShortString::try_new(name) {
            self.headers.insert(name, AMQPValue::LongLongInt(value));
        }
        self
    }

    /// Whether the broker delivered it before.
    pub fn redelivered(mut self, redelivered: bool) -> Self {
        self.context.redelivered = redelivered;
        self
    }

    /// Shared state, as `.state(…)` on the runtime builder registers it.
    pub fn state<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.state.insert(Arc::new(value));
        self
    }

    /// The context.
    pub fn build(mut self) -> Context {
        self.context.properties = self.context.properties.with_headers(self.headers);
        self.context.state = Arc::new(self.state);
        self.context
    }
}
