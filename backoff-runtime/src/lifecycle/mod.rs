//! The runtime's life: the builder, supervision, one connection's
//! generation, and health.

pub(crate) mod broker_return;
pub(crate) mod builder;
mod generation;
pub(crate) mod health;
#[cfg(feature = "http")]
pub mod http;
pub(crate) mod outbox_relay;
mod registration;
pub(crate) mod runtime;
mod settings;
