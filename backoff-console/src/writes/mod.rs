//! The JSON API's writes, one module per action: replay, discard and edit
//! of chosen dead letters, purge of a dead-letter queue and the rebuild of
//! its index, the start of a replay job and its pause, resume and stop.
//! Each is a POST the guard let through with a token, from the console's
//! own page, as JSON; refused in read-only mode; and recorded in the audit
//! log, with its outcome, before it answers. A pass over the queue runs one
//! at a time with every other pass over it; a request about replay jobs,
//! one at a time with the others about the same replay log (a job's
//! driver runs on its own task, and its end is recorded when it comes).

pub(crate) mod audit_entry;
pub(crate) mod discard;
pub(crate) mod edit;
pub(crate) mod edit_request;
pub(crate) mod job_action;
pub(crate) mod job_control;
pub(crate) mod job_outcome;
pub(crate) mod job_request;
pub(crate) mod job_task;
pub(crate) mod message_write;
pub(crate) mod outcome;
pub(crate) mod purge;
pub(crate) mod queue_write;
pub(crate) mod rebuild_index;
pub(crate) mod replay;
pub(crate) mod replay_job;
pub(crate) mod write_request;
