//! The lapin + tokio runtime of [rabbit-backoff](https://docs.rs/rabbit-backoff).
//!
//! It declares each consumer's topology, runs the consume → decode → handle →
//! ack / republish loop with publisher confirms, and offers a typed
//! [`Publisher`]. Every decision it executes comes from `backoff-core`.
//!
//! The modules are its layers, each using only those below it (from the
//! bottom up):
//! - `transport`: what the framework asks of a broker ([`transport::Transport`]),
//!   over lapin, and its [`TransportError`](transport::TransportError);
//! - `error.rs` and `store_error.rs`: everything the runtime fails with
//!   ([`Error`]), wrapping the transport's, the dedupe store's and the core's
//!   errors;
//! - `telemetry`: the framework's wall clock, its metrics, trace context;
//! - [`clock`]: that clock's public face, `now` and `now_rfc3339`, for
//!   operator tools and the in-memory broker;
//! - `broker`: the runtime's own requests over the transport, in its errors:
//!   a confirm channel for a queue, declaring or checking a topology,
//!   inspecting queues and exchanges, asking whether delayed retries apply;
//! - `publish`: publishing with confirms, the typed [`Publisher`] and
//!   [`Outgoing`] messages;
//! - `settle`: what a decision does (ack, requeue, reject, republish-then-ack,
//!   the framework's headers, fitting copies into a frame);
//! - `dedupe`: the inbox stores and the outbox;
//! - `consume`: the loop per consumer, its context, state, extractors,
//!   what a delivery's headers say of its past attempts, and shutdown;
//! - `lifecycle`: the builder, supervision and health;
//! - [`toolkit`]: on top, used by nothing in the runtime: what operator
//!   tools built beside it (the dead-letter operations, the retry tiers'
//!   listing, status) use from the layers below.
//!
//! The operator tools are a crate of their own, so that a service compiles
//! only what it runs; the runtime does not depend on them.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod broker;
pub mod clock;
mod consume;
pub mod dedupe;
mod error;
mod lifecycle;
mod publish;
mod settle;
mod store_error;
mod telemetry;
pub mod toolkit;
pub mod transport;

pub use broker::declare::{check_topology, declare_topology};
pub use consume::consumer::Consumer;
pub use consume::context::{Context, ContextBuilder};
pub use consume::extract::FromContext;
pub use consume::shutdown::ShutdownHandle;
pub use consume::state::{State, StateRequirement};
pub use error::{Error, MissingObject, PublishFailure};
pub use lifecycle::builder::{DEFAULT_AMQP_URL, RuntimeBuilder, amqp_url_from_env};
pub use lifecycle::health::{Health, HealthWatch};
#[cfg(feature = "http")]
pub use lifecycle::http;
pub use lifecycle::runtime::{RunningRuntime, Runtime, connect};
pub use publish::outgoing::Outgoing;
pub use publish::publisher::Publisher;
pub use telemetry::meters;

/// The runtime's per-message work that needs no I/O, for benchmarks. Not a
/// stable API.
#[doc(hidden)]
pub mod __hot_path {
    pub use crate::consume::retry_count::retry_count_of;
    pub use crate::settle::copy_properties::republish_properties;
    pub use crate::transport::frame_guard::{read_through, write_through};
}

/// Re-exported so that users need not depend on lapin for headers and values.
pub use lapin;
