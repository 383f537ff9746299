//! The JSON API's writes, one module per action: replay, discard and edit
//! of chosen dead letters, purge of a dead-letter queue and the rebuild of
//! its index. Each is a POST the guard let through with a token, from the
//! console's own page, as JSON; refused in read-only mode; run one at a
//! time with every other pass over the queue; and recorded in the audit
//! log, with its outcome, before it answers.

pub(crate) mod audit_entry;
pub(crate) mod discard;
pub(crate) mod edit;
pub(crate) mod edit_request;
pub(crate) mod message_write;
pub(crate) mod outcome;
pub(crate) mod purge;
pub(crate) mod queue_write;
pub(crate) mod rebuild_index;
pub(crate) mod replay;
pub(crate) mod write_request;
