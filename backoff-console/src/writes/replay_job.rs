//! `POST api/consumers/{queue}/replay-jobs` with a selection and a plan: a
//! replay job started ([`Dlq::start_replay`]) on a connection of its own
//! and driven to its end by a task of this console; answered at once with
//! its id and status. Its start is audited, and its end when the task sees
//! it.
//!
//! [`Dlq::start_replay`]: rabbit_backoff_dead_letters::Dlq::start_replay

use std::sync::Arc;

use axum::Json;
use axum::extract::State as Shared;
use rabbit_backoff_dead_letters::{ReplayJobStatus, ReplayOptions};

use super::audit_entry::{AuditEntry, AuditSelection};
use super::job_action::JobAction;
use super::job_outcome::{self, JobOutcome};
use super::job_request::JobRequest;
use super::job_task;
use super::write_request::WriteRequest;
use crate::api_error::ApiError;
use crate::state::State;

/// `POST api/consumers/{queue}/replay-jobs`.
pub(crate) async fn start_replay_job(
    Shared(state): Shared<Arc<State>>,
    request: WriteRequest<JobRequest>,
) -> Result<Json<JobOutcome>, ApiError> {
    let WriteRequest { queue, who, body } = request;
    let outcome = start(&state, &queue, &who, &body).await;
    let mut entry = AuditEntry::new(
        &who,
        JobAction::Start.name(),
        &queue,
        AuditSelection::ReplayJob(body.clone()),
    );
    entry.note = Some(body.plan.describe());
    match &outcome {
        Ok(status) => entry.job = Some(status.id.clone()),
        Err(e) => entry.error = Some(e.message().to_owned()),
    }
    job_outcome::answer(&state, who, &entry, outcome).await
}

/// Starts the job of `request` by `who` on the dead-letter queue of
/// `queue`, hands it to its task, and reads its status.
async fn start(
    state: &Arc<State>,
    queue: &str,
    who: &str,
    request: &JobRequest,
) -> Result<ReplayJobStatus, ApiError> {
    let filter = request.selection.filter().map_err(ApiError::bad_request)?;
    let (plan, rate) = request.plan.plan().map_err(ApiError::bad_request)?;
    let mut options = ReplayOptions::default().by(who);
    if let Some(rate) = rate {
        options = options.rate(rate);
    }
    let driver = Arc::clone(state);
    let (queue, who, selection) = (
        queue.to_owned(),
        who.to_owned(),
        AuditSelection::ReplayJob(request.clone()),
    );
    let (_, status) = state
        .with_replay_log(&queue.clone(), move |consumer, log| {
            Box::pin(async move {
                let dlq = driver.connect_to(consumer).await?;
                let job = match dlq.start_replay(&filter, &options, &plan).await {
                    Ok(job) => job,
                    Err(e) => {
                        dlq.close().await;
                        return Err(ApiError::replay_job(e));
                    }
                };
                let id = job.id().to_owned();
                job_task::spawn(driver, queue, who, selection, dlq, job);
                log.replay_job(&id).await.map_err(|e| {
                    ApiError::broker(format!(
                        "replay job {id} started, but its status could not be read: {e}"
                    ))
                })
            })
        })
        .await?;
    status
}
