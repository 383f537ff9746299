//! The runtime's life: the builder, supervision and health.

pub(crate) mod broker_return;
pub(crate) mod health;
#[cfg(feature = "http")]
pub mod http;
pub(crate) mod outbox_relay;
pub(crate) mod runtime;
