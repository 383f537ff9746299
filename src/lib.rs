//! Declarative RabbitMQ consumers with exponential backoff.
//!
//! Annotate an `async fn` handler with [`backoff_consumer`], derive
//! [`Classify`](derive@Classify) on its error type, register it on a
//! [`Runtime`]: the framework declares the work queue, one retry queue per
//! delay and a dead-letter queue, then consumes. A failed message waits in the
//! retry queue of its tier and comes back; a permanent failure, or one that
//! used every tier, lands in the dead-letter queue with `x-error`,
//! `x-failed-at` and `x-retry-count`. The original is acked only after the
//! broker confirmed the copy, so nothing is lost.
//!
//! ```no_run
//! use rabbit_backoff::prelude::*;
//!
//! #[derive(Debug, serde::Deserialize)]
//! struct Order { id: u64 }
//!
//! #[derive(Debug, Classify)]
//! enum OrderError {
//!     Unavailable,
//!     #[permanent]
//!     Invalid(String),
//! }
//! # impl std::fmt::Display for OrderError {
//! #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "{self:?}") }
//! # }
//!
//! /// Stores an order.
//! #[backoff_consumer(queue = "orders", delays = "5s,15s,60s")]
//! async fn process_order(order: Order, ctx: &Context) -> Result<(), OrderError> {
//!     if order.id == 0 {
//!         return Err(OrderError::Invalid("id 0".into()));
//!     }
//!     println!("order {} (attempt {})", order.id, ctx.attempt());
//!     Ok(())
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), rabbit_backoff::Error> {
//!     Runtime::builder().consumer(process_order).run().await
//! }
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub use rabbit_backoff_core::{
    ATTRIBUTE_KEYS, BreakerSpec, BrokerRelease, ClassicOnCluster, Classify, ClusterEvidence,
    ConsumerSpec, DeadLetterIndex, DeclareMode, Dedupe, DedupeKey, DelayError, Delays, ErrorClass,
    ExchangeKind, HeldRetries, Jitter, MAX_DELAY_MS, MAX_JITTER_PERCENT, MAX_TIERS, NotLinear,
    QueueType, RetryBackend, RetryReturn, SUB_QUEUES, SpecError, parse_duration,
};
pub use rabbit_backoff_runtime::{meters, transport};

/// Dropping duplicates and publishing with the handler's effects: the
/// inbox stores of consumers with `dedupe = "…"` (`MemoryStore`, and with the
/// features of the same names `PostgresStore` and `RedisStore`), the handler
/// parameter `Tx` (the PostgreSQL transaction the inbox row commits in) and
/// the transactional outbox. See docs/duplicates.md.
pub use rabbit_backoff_runtime::dedupe;

/// An in-memory RabbitMQ with virtual time, for testing consumers without a
/// broker (feature `testing`): see docs/testing.md.
#[cfg(feature = "testing")]
pub use rabbit_backoff_testing as testing;

/// The web console as an axum `Router` a service mounts under a path of its
/// own (feature `console`): see docs/console.md.
#[cfg(feature = "console")]
pub use rabbit_backoff_console as console;

/// Health over HTTP (feature `http`).
#[cfg(feature = "http")]
pub use rabbit_backoff_runtime::http;
pub use rabbit_backoff_runtime::{
    Consumer, Context, ContextBuilder, DEFAULT_AMQP_URL, Error, FromContext, Health, HealthWatch,
    Outgoing, PublishFailure, Publisher, RunningRuntime, Runtime, RuntimeBuilder, ShutdownHandle,
    State, StateRequirement, amqp_url_from_env, connect, lapin,
};

// The status of a consumer's queues and what waits in its retry tiers: the
// operator tooling, with `dead_letters` (feature `dead-letters`).
#[cfg(feature = "dead-letters")]
pub use rabbit_backoff_dead_letters::{
    ConsumerStatus, QueueStatus, TierListing, WaitingMessage, list_retry_tier, status,
};

/// Turns an `async fn` handler into a consumer of the same name.
///
/// ```
/// use rabbit_backoff::prelude::*;
///
/// #[derive(Debug, Classify)]
/// enum MailError { Smtp }
/// # impl std::fmt::Display for MailError {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("smtp") }
/// # }
/// struct Mailer;
///
/// #[backoff_consumer(queue = "emails", delays = "1s,10s", prefetch = 4)]
/// async fn send_email(to: String, mailer: State<Mailer>) -> Result<(), MailError> {
///     Ok(())
/// }
///
/// let spec = send_email.spec();
/// assert_eq!(spec.queue, "emails");
/// assert_eq!(spec.delays.to_string(), "1s,10s");
/// assert_eq!(spec.prefetch, 4);
/// ```
///
/// The handler takes the decoded message (any `serde::de::DeserializeOwned`,
/// from JSON), and optionally `ctx: &Context` and any number of `State<T>`
/// registered on the builder. It returns `Result<(), E>` where `E` implements
/// [`Classify`](trait@Classify) and `Display` (`x-error` is its `Display`).
///
/// | key | meaning | default |
/// |---|---|---|
/// | `queue` | the work queue; every default name derives from it | required |
/// | `delays` | one retry tier per delay: `ms`, `s`, `m`, `h` | required |
/// | `prefetch` | unacked deliveries in flight (`basic.qos`) | 50 |
/// | `concurrency` | handlers running at once | `prefetch` |
/// | `exchange`, `exchange_type` | the work exchange and its type | `<queue>`, `"direct"` |
/// | `routing_key` | binding of the work queue | `<queue>` |
/// | `retry_exchange` | | `<queue>.retry` |
/// | `retry_queue` | pattern with `{ms}` | `<queue>.retry_{ms}ms` |
/// | `dead_letter_exchange` | | `<queue>.dlx` |
/// | `dead_letter_queue` | | `<queue>.dlq` |
/// | `dead_letter_routing_key` | | `<queue>.dlq` |
/// | `retry_return` | where an expired retry goes: `"queue"` (default exchange, straight to the work queue) or `"exchange"` (the work exchange with `routing_key`; not on a fanout or headers exchange) | `"queue"` |
/// | `queue_type` | `"quorum"` or `"classic"` (to adopt an existing classic topology); always declared as `x-queue-type`, so a vhost's `default_queue_type` does not change it | `"quorum"` |
/// | `delivery_limit` | quorum work queue's `x-delivery-limit` | 20 |
/// | `timeout` | longest a handler call may take (a transient failure past it) | none |
/// | `jitter` | spreads each tier over five sub-queues within ± this percentage of its delay, e.g. `"20%"` | none |
/// | `max_age` | dead-letter a failing message (reason `expired`) once its first failure is older than this, e.g. `"1h"` | none |
/// | `immediate` | retry a failed call this many times in the process (after 50 ms, 100 ms, …) before the message goes to a retry tier | 0 |
/// | `breaker` | a circuit breaker, e.g. `"50% of 20, pause 30s"`: stops consuming while most recent attempts fail transiently | none |
/// | `declare` | `"declare"` the topology, or `"passive"`: only check that every exchange and queue exists (not their arguments), for topologies operators own | `"declare"` |
/// | `dedupe` | drop duplicates: a delivery whose key was handled (or dead-lettered, or discarded) within this window is acked without the handler; needs [`RuntimeBuilder::dedupe_store`] | none |
/// | `dedupe_key` | the key: `"message_id"` or `"header:<name>"` (only with `dedupe`) | `"message_id"` |
/// | `retry` | how a retry waits: `"tiers"` (a TTL retry queue per delay, a copy per attempt, every broker); `"delayed"` (RabbitMQ 4.3's delayed retries of the quorum work queue, a linear ladder); `"scheduled"` (experimental, feature `amqp1`: RabbitMQ 4.3 holds the delivery until the time the consumer names). docs/retry-backends.md compares them | `"tiers"` |
/// | `dead_letter_index` | `"on"`: a stream beside the dead-letter queue that `dlq groups` reads instead of the queue (written by the broker on classic topologies, by the consumer on quorum ones: [`IndexFeed`](topology::IndexFeed)); `"off"`: none, the broker writes each dead letter once (see [`DeadLetterIndex`]) | `"on"` |
/// | `crate` | path of this crate, when renamed | `::rabbit_backoff` |
pub use rabbit_backoff_macros::backoff_consumer;

/// Derives [`Classify`](trait@Classify): every variant is transient unless
/// marked `#[permanent]`; `#[permanent]` on a struct or on the enum itself
/// changes the default, and `#[transient]` marks an exception.
///
/// ```
/// use rabbit_backoff::{Classify, ErrorClass};
///
/// #[derive(Classify)]
/// enum OrderError {
///     Unavailable,
///     #[permanent]
///     Invalid(String),
/// }
/// assert_eq!(OrderError::Unavailable.classify(), ErrorClass::Transient);
/// assert_eq!(OrderError::Invalid("x".into()).classify(), ErrorClass::Permanent);
/// ```
pub use rabbit_backoff_macros::Classify;

pub mod prelude;

#[cfg(feature = "dead-letters")]
pub mod dead_letters;
pub mod rules;
pub mod topology;

// The README and the book (docs/), whose code blocks are doctests.
#[cfg(doctest)]
mod book;

#[doc(hidden)]
pub mod __private;
