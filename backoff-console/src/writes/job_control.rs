//! `POST api/consumers/{queue}/replay-jobs/{id}/pause`, `…/resume` and
//! `…/stop` with `{}`: an operator's control of a replay job, wherever it
//! runs, recorded in its replay log with who asked
//! ([`Dlq::control_replay`]). A resume of a job that nothing drives any
//! more (interrupted) takes it over: this console drives it from its log
//! ([`Dlq::resume_replay`]). Each is audited.
//!
//! [`Dlq::control_replay`]: rabbit_backoff_dead_letters::Dlq::control_replay
//! [`Dlq::resume_replay`]: rabbit_backoff_dead_letters::Dlq::resume_replay

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State as Shared};
use rabbit_backoff_dead_letters::{ReplayJobState, ReplayJobStatus};
use serde::Deserialize;

use super::audit_entry::{AuditEntry, AuditSelection};
use super::job_action::JobAction;
use super::job_outcome::{self, JobOutcome};
use super::job_task;
use super::write_request::{WriteBody, WriteRequest};
use crate::api_error::ApiError;
use crate::job_path::JobPath;
use crate::state::State;

/// The body of a control: an empty JSON object.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobControlRequest {}

impl WriteBody for JobControlRequest {
    const EXPECTED: &'static str = "{}";
}

/// What the audit notes of a job taken over.
const TAKEN_OVER: &str = "taken over: nothing drove it; this console drives it from its replay log";

/// `POST api/consumers/{queue}/replay-jobs/{id}/pause`.
pub(crate) async fn pause(
    Shared(state): Shared<Arc<State>>,
    Path(path): Path<JobPath>,
    request: WriteRequest<JobControlRequest>,
) -> Result<Json<JobOutcome>, ApiError> {
    control(&state, path.id, request, JobAction::Pause).await
}

/// `POST api/consumers/{queue}/replay-jobs/{id}/resume`.
pub(crate) async fn resume(
    Shared(state): Shared<Arc<State>>,
    Path(path): Path<JobPath>,
    request: WriteRequest<JobControlRequest>,
) -> Result<Json<JobOutcome>, ApiError> {
    control(&state, path.id, request, JobAction::Resume).await
}

/// `POST api/consumers/{queue}/replay-jobs/{id}/stop`.
pub(crate) async fn stop(
    Shared(state): Shared<Arc<State>>,
    Path(path): Path<JobPath>,
    request: WriteRequest<JobControlRequest>,
) -> Result<Json<JobOutcome>, ApiError> {
    control(&state, path.id, request, JobAction::Stop).await
}

/// Applies `action` to job `id`, records it, and answers.
async fn control(
    state: &Arc<State>,
    id: String,
    request: WriteRequest<JobControlRequest>,
    action: JobAction,
) -> Result<Json<JobOutcome>, ApiError> {
    let WriteRequest { queue, who, .. } = request;
    let outcome = apply(state, &queue, &who, &id, action).await;
    let selection = match &outcome {
        Ok((status, _)) => status.selection.clone(),
        Err(_) => format!("replay job {id}"),
    };
    let mut entry = AuditEntry::new(
        &who,
        action.name(),
        &queue,
        AuditSelection::Described(selection),
    );
    entry.job = Some(id);
    let outcome = match outcome {
        Ok((status, note)) => {
            entry.note = note;
            Ok(status)
        }
        Err(e) => {
            entry.error = Some(e.message().to_owned());
            Err(e)
        }
    };
    job_outcome::answer(state, who, &entry, outcome).await
}

/// The job's status after `action`, and what the audit notes of it.
async fn apply(
    state: &Arc<State>,
    queue: &str,
    who: &str,
    id: &str,
    action: JobAction,
) -> Result<(ReplayJobStatus, Option<String>), ApiError> {
    let driver = Arc::clone(state);
    let (queue, who, id) = (queue.to_owned(), who.to_owned(), id.to_owned());
    let (_, applied) = state
        .with_replay_log(&queue.clone(), move |consumer, log| {
            Box::pin(async move {
                let current = log.replay_job(&id).await.map_err(ApiError::replay_job)?;
                if action == JobAction::Resume && current.state == ReplayJobState::Interrupted {
                    let dlq = driver.connect_to(consumer).await?;
                    let job = match dlq.resume_replay(&id, Some(&who)).await {
                        Ok(job) => job,
                        Err(e) => {
                            dlq.close().await;
                            return Err(ApiError::replay_job(e));
                        }
                    };
                    let selection = AuditSelection::Described(current.selection);
                    job_task::spawn(driver, queue, who, selection, dlq, job);
                    let status = log.replay_job(&id).await.map_err(ApiError::replay_job)?;
                    return Ok((status, Some(TAKEN_OVER.to_owned())));
                }
                let Some(control) = action.control() else {
                    return Err(ApiError::bad_request(format!(
                        "`{}` is no control of a replay job",
                        action.name()
                    )));
                };
                let status = log
                    .control_replay(&id, control, Some(&who))
                    .await
                    .map_err(ApiError::replay_job)?;
                Ok((status, None))
            })
        })
        .await?;
    applied
}
