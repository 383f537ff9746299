//! The runtime's life: the builder, supervision, health and shutdown.

pub(crate) mod health;
pub(crate) mod runtime;
pub(crate) mod shutdown;
