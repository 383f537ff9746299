//! Settling a delivery: what a consumer's decision does on the broker (ack,
//! requeue, reject, republish-then-ack, with the framework's headers and
//! fitting copies into a frame), the metrics of each outcome, and publishing
//! with confirms (the framework's copies and the typed [`Publisher`]).
//!
//! [`Publisher`]: crate::Publisher

pub(crate) mod acks;
pub(crate) mod clock;
pub(crate) mod copy;
pub(crate) mod executor;
pub(crate) mod frame_fit;
pub mod meters;
pub(crate) mod outgoing;
pub(crate) mod publish;
pub(crate) mod publisher;
pub(crate) mod settlement;
pub(crate) mod trace_context;
