//! What the framework measures and stamps by: its wall clock (virtual under
//! paused tokio time), the metrics of each outcome, and the W3C trace
//! context carried in headers.

pub(crate) mod failure_log;
pub mod meters;
pub(crate) mod trace_context;
pub(crate) mod wall_clock;
