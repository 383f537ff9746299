//! What a replay job's start, pause, resume or stop answers: the job's id,
//! its status as its replay log tells it just after, and who asked.

use axum::Json;
use rabbit_backoff_dead_letters::ReplayJobStatus;
use serde::Serialize;

use super::audit_entry::AuditEntry;
use crate::api_error::ApiError;
use crate::state::State;

/// A replay job's id and status, and who asked.
#[derive(Debug, Serialize)]
pub(crate) struct JobOutcome {
    /// The job's id.
    id: String,
    /// Who asked.
    by: String,
    /// Its status.
    job: ReplayJobStatus,
}

/// Records `entry` in the audit log, then answers with `outcome`.
pub(crate) async fn answer(
    state: &State,
    who: String,
    entry: &AuditEntry,
    outcome: Result<ReplayJobStatus, ApiError>,
) -> Result<Json<JobOutcome>, ApiError> {
    state.record(entry).await?;
    let job = outcome?;
    Ok(Json(JobOutcome {
        id: job.id.clone(),
        by: who,
        job,
    }))
}
