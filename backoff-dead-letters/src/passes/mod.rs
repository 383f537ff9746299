//! Passes over a dead-letter queue, and the operations made of them: one
//! pass that keeps every message it does not take at its place (`pass`,
//! with its rotation, its marker protocol and the requests it makes of the
//! queue: `rotation`, `marker`, `pass_queue`), the scan that peeks, visits,
//! discards or replays in it (`scan`), a replay and its options
//! (`replay`, `replay_options`, `edit`), export and import (`export`), a
//! purge (`purge`), and what an operation did (`report`).

pub(crate) mod edit;
pub(crate) mod export;
pub(crate) mod marker;
pub(crate) mod pass;
pub(crate) mod pass_queue;
pub(crate) mod purge;
pub(crate) mod replay;
pub(crate) mod replay_gate;
pub(crate) mod replay_options;
pub(crate) mod report;
pub(crate) mod rotation;
pub(crate) mod scan;
