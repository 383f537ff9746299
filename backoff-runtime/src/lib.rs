//! The lapin + tokio runtime of [rabbit-backoff](https://docs.rs/rabbit-backoff).
//!
//! It declares each consumer's topology, runs the consume → decode → handle →
//! ack / republish loop with publisher confirms, and offers a typed
//! [`Publisher`]. Every decision it executes comes from `backoff-core`.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod amqp;
mod consumer;
mod context;
mod dead_letter_filter;
mod dead_letter_message;
mod delivery;
mod dlq;
mod error;
mod frame_fit;
mod health;
mod publish;
mod publisher;
mod runtime;
mod shutdown;
mod state;
mod status;
mod topology;
pub mod transport;
mod worker;

pub use consumer::Consumer;
pub use context::{Context, ContextBuilder};
pub use dead_letter_filter::DeadLetterFilter;
pub use dead_letter_message::{BODY_PREVIEW_LEN, DeadLetterMessage};
pub use dlq::{DeadLetterReport, Dlq, ReplayOptions, SkippedMessage};
pub use error::{Error, MissingObject, PublishFailure};
pub use health::{Health, HealthWatch};
pub use publisher::{Outgoing, Publisher};
pub use runtime::{Runtime, RuntimeBuilder, connect};
pub use shutdown::ShutdownHandle;
pub use state::{State, StateRequirement};
pub use status::{ConsumerStatus, QueueStatus, status};
pub use topology::{check_topology, declare_topology};

/// The runtime's per-message work that needs no I/O, for benchmarks. Not a
/// stable API.
#[doc(hidden)]
pub mod __hot_path {
    pub use crate::delivery::{republish_properties, retry_count_of};
}

/// Re-exported so that users need not depend on lapin for headers and values.
pub use lapin;

/// The default broker address: `amqp://guest:guest@127.0.0.1:5672/%2f`.
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The broker address from `AMQP_URL`, or [`DEFAULT_AMQP_URL`].
pub fn amqp_url_from_env() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| DEFAULT_AMQP_URL.to_owned())
}
