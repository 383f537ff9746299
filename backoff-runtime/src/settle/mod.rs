//! Settling a delivery: acknowledging it, requeueing it, or publishing its
//! copy (retry, dead letter, replay) and acknowledging it once confirmed.

pub(crate) mod clock;
pub(crate) mod copy;
pub(crate) mod frame_fit;
pub(crate) mod outgoing;
pub(crate) mod publish;
pub(crate) mod settlement;
pub(crate) mod trace_context;
