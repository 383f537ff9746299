//! [`ReplayJobError`]: why a replay job cannot start, go on or be
//! controlled.

use rabbit_backoff_core::PlanError;
use rabbit_backoff_runtime::Error;

/// Why a replay job cannot start, go on or be controlled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayJobError {
    /// Another replay job runs on the dead-letter queue.
    #[error(
        "a replay job{} is running on `{queue}`; one runs at a time: watch it with `dlq replay --status ID`, or stop it with `dlq replay --stop ID`",
        job.as_ref().map(|job| format!(" ({job})")).unwrap_or_default()
    )]
    Busy {
        /// The dead-letter queue.
        queue: String,
        /// The running job, when the log names it.
        job: Option<String>,
    },
    /// No job has this id in the queue's replay log.
    #[error(
        "no replay job `{job}` in the replay log of `{queue}` (list them with `dlq replay --status all`)"
    )]
    Unknown {
        /// The id asked for.
        job: String,
        /// The dead-letter queue.
        queue: String,
    },
    /// The job has ended.
    #[error("replay job {job} has ended ({state}); there is nothing to {action}")]
    Ended {
        /// The job.
        job: String,
        /// How it ended.
        state: &'static str,
        /// What was asked.
        action: &'static str,
    },
    /// The job runs elsewhere, or runs no more, and cannot do what was
    /// asked from here.
    #[error("{0}")]
    Refused(String),
    /// The plan makes no sense.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The broker refused or lost the connection.
    #[error(transparent)]
    Broker(#[from] Error),
}
