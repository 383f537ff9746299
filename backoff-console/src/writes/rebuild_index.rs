//! `POST api/consumers/{queue}/rebuild-index` with `{}`: a pass over the
//! dead-letter queue that leaves a checkpoint in its index
//! ([`Dlq::rebuild_index`]), so that the groups are read from the index
//! again.
//!
//! [`Dlq::rebuild_index`]: rabbit_backoff_dead_letters::Dlq::rebuild_index

use std::sync::Arc;

use axum::Json;
use axum::extract::State as Shared;
use rabbit_backoff_dead_letters::GroupReport;
use serde::Serialize;

use super::outcome::WriteOutcome;
use super::queue_write::{self, QueueWriteRequest};
use super::write_request::WriteRequest;
use crate::api_error::ApiError;
use crate::state::State;

/// What a rebuild did: the groups the pass saw and the checkpoint it left,
/// and why the groups are read from where they are.
#[derive(Debug, Serialize)]
pub(crate) struct Rebuilt {
    #[serde(flatten)]
    report: GroupReport,
    /// [`GroupReport::reason`].
    source_reason: String,
}

/// `POST api/consumers/{queue}/rebuild-index`.
pub(crate) async fn rebuild_index(
    Shared(state): Shared<Arc<State>>,
    request: WriteRequest<QueueWriteRequest>,
) -> Result<Json<WriteOutcome<Rebuilt>>, ApiError> {
    queue_write::run(
        &state,
        request,
        "rebuild-index",
        |dlq| {
            Box::pin(async move {
                let report = dlq.rebuild_index().await?;
                Ok(Rebuilt {
                    source_reason: report.reason(),
                    report,
                })
            })
        },
        |rebuilt| {
            let count = rebuilt.report.groups.iter().map(|g| g.count).sum();
            (count, Some(rebuilt.source_reason.clone()))
        },
    )
    .await
}
