//! `GET api/consumers/{queue}/replay-jobs` and
//! `GET api/consumers/{queue}/replay-jobs/{id}`: the replay jobs of a
//! dead-letter queue as its replay log tells them, wherever they were
//! started and whether or not this console still runs them.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State as Shared};
use rabbit_backoff_dead_letters::ReplayJobStatus;

use crate::api_error::ApiError;
use crate::job_path::JobPath;
use crate::state::State;

/// `GET api/consumers/{queue}/replay-jobs`: every job, the newest first
/// (none when no job was ever started).
pub(crate) async fn replay_jobs(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
) -> Result<Json<Vec<ReplayJobStatus>>, ApiError> {
    let (_, jobs) = state
        .with_replay_log(&queue, |_, log| Box::pin(log.replay_jobs()))
        .await?;
    Ok(Json(jobs.map_err(ApiError::broker)?))
}

/// `GET api/consumers/{queue}/replay-jobs/{id}`: one job (404 when its
/// replay log has no such job).
pub(crate) async fn replay_job(
    Shared(state): Shared<Arc<State>>,
    Path(JobPath { queue, id }): Path<JobPath>,
) -> Result<Json<ReplayJobStatus>, ApiError> {
    let (_, job) = state
        .with_replay_log(&queue, move |_, log| {
            Box::pin(async move { log.replay_job(&id).await })
        })
        .await?;
    Ok(Json(job.map_err(ApiError::replay_job)?))
}
