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
/// What follows is the book's page on the attribute (docs/attributes.md),
/// included here as one text: each key in one row, with a link to its detail.
///
#[doc = include_str!("../docs/attributes.md")]
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
