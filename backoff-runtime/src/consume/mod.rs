//! Consuming: the loop per consumer, the handler's context and state.

pub(crate) mod consumer;
pub(crate) mod context;
pub(crate) mod extract;
pub(crate) mod inbox;
pub mod meters;
pub(crate) mod state;
pub(crate) mod worker;
