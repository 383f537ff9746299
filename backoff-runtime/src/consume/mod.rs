//! Consuming: the loop per consumer, the handler's context and state, and
//! the shutdown it watches.

pub(crate) mod consumer;
pub(crate) mod context;
pub(crate) mod dedupe;
pub(crate) mod extract;
mod handler_call;
pub(crate) mod retry_count;
pub(crate) mod shutdown;
pub(crate) mod state;
pub(crate) mod worker;
