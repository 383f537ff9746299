//! [`JobPath`]: the path of one replay job in the API,
//! `api/consumers/{queue}/replay-jobs/{id}`.

use serde::Deserialize;

/// A consumer's work queue and the id of one of its replay jobs.
#[derive(Debug, Deserialize)]
pub(crate) struct JobPath {
    /// The consumer's work queue.
    pub(crate) queue: String,
    /// The job's id.
    pub(crate) id: String,
}
