//! The lapin + tokio runtime of [rabbit-backoff](https://docs.rs/rabbit-backoff).
//!
//! It declares each consumer's topology, runs the consume → decode → handle →
//! ack / republish loop with publisher confirms, and offers a typed
//! [`Publisher`]. Every decision it executes comes from `backoff-core`.
//!
//! The modules are its layers, each using only those below it:
//! - `transport`: what the framework asks of a broker ([`transport::Transport`]),
//!   over lapin, and declaring a topology;
//! - `settle`: ack, requeue, republish-then-ack, the framework's headers and
//!   fitting copies into a frame;
//! - `consume`: the loop per consumer, its context, state and extractors;
//! - `operations`: dead-letter operations, status, the publisher;
//! - `lifecycle`: the builder, supervision, health and shutdown.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod consume;
mod error;
pub mod idempotency;
mod lifecycle;
mod operations;
mod settle;
pub mod transport;

pub use consume::consumer::Consumer;
pub use consume::context::{Context, ContextBuilder};
pub use consume::extract::FromContext;
pub use consume::meters;
pub use consume::state::{State, StateRequirement};
pub use error::{Error, MissingObject, PublishFailure};
pub use lifecycle::health::{Health, HealthWatch};
#[cfg(feature = "http")]
pub use lifecycle::http;
pub use lifecycle::runtime::{RunningRuntime, Runtime, RuntimeBuilder, connect};
pub use lifecycle::shutdown::ShutdownHandle;
pub use operations::dead_letter_filter::DeadLetterFilter;
pub use operations::dead_letter_group::DeadLetterGroup;
pub use operations::dead_letter_message::{BODY_PREVIEW_LEN, DeadLetterMessage};
pub use operations::dead_letter_pass::is_marker_queue;
pub use operations::dead_letter_record::{
    DeadLetterRecord, RecordError, RecordProperties, TypedValue,
};
pub use operations::dlq::{DeadLetterReport, Dlq, ExportReport, ReplayOptions, SkippedMessage};
pub use operations::publisher::Publisher;
pub use operations::status::{ConsumerStatus, QueueStatus, status};
pub use settle::outgoing::Outgoing;
pub use transport::declare::{check_topology, declare_topology};

/// The runtime's per-message work that needs no I/O, for benchmarks. Not a
/// stable API.
#[doc(hidden)]
pub mod __hot_path {
    pub use crate::settle::copy::{republish_properties, retry_count_of};
}

/// Re-exported so that users need not depend on lapin for headers and values.
pub use lapin;

/// The default broker address: `amqp://guest:guest@127.0.0.1:5672/%2f`.
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The broker address from `AMQP_URL`, or [`DEFAULT_AMQP_URL`].
pub fn amqp_url_from_env() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| DEFAULT_AMQP_URL.to_owned())
}
