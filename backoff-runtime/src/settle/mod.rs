//! Settling a delivery: what a consumer's decision does on the broker (ack,
//! requeue, reject, republish-then-ack, with the framework's headers and
//! fitting copies into a frame).

pub(crate) mod acks;
pub(crate) mod copy_properties;
pub(crate) mod encoded_size;
pub(crate) mod executor;
pub(crate) mod first_failure;
mod held_retry;
mod oversized;
pub(crate) mod replay_marker;
pub(crate) mod settlement;
pub(crate) mod shrink_copy;
