//! The runtime's life: the builder, supervision, health and shutdown.

pub(crate) mod health;
#[cfg(feature = "http")]
pub mod http;
pub(crate) mod relay;
pub(crate) mod runtime;
pub(crate) mod shutdown;
