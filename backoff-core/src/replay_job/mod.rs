//! A replay that watches its own result: what became of each replayed
//! message ([`ReplayFate`]), the plan a replay follows ([`ReplayPlan`]) and
//! the verdict it draws from the fates it has seen ([`FateTally`]).
//!
//! The consumer records a fate for each delivery that carries the job's
//! marker ([`headers::REPLAY_JOB`](crate::headers::REPLAY_JOB)); the
//! operator side sends the copies and decides, from these rules, whether
//! to go on.

mod fate;
mod plan;
mod replay_log_decl;
mod tally;

pub use fate::{Fate, FateBatch, ReplayFate};
pub use plan::{MAX_CANARY, PlanError, ReplayPlan, parse_rate, parse_threshold};
pub use replay_log_decl::{REPLAY_LOG_MAX_AGE, REPLAY_LOG_MAX_BYTES, replay_log_decl};
pub use tally::{FateCounts, FateTally, ReplayVerdict};
