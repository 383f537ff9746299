//! `POST api/consumers/{queue}/purge` with `{}`: every ready message of the
//! dead-letter queue removed at once ([`Dlq::purge`]), an empty checkpoint
//! left in its index.
//!
//! [`Dlq::purge`]: rabbit_backoff_dead_letters::Dlq::purge

use std::sync::Arc;

use axum::Json;
use axum::extract::State as Shared;
use rabbit_backoff_dead_letters::PurgeReport;

use super::outcome::WriteOutcome;
use super::queue_write::{self, QueueWriteRequest};
use super::write_request::WriteRequest;
use crate::api_error::ApiError;
use crate::state::State;

/// `POST api/consumers/{queue}/purge`: how many messages left, and the
/// checkpoint left in the index.
pub(crate) async fn purge(
    Shared(state): Shared<Arc<State>>,
    request: WriteRequest<QueueWriteRequest>,
) -> Result<Json<WriteOutcome<PurgeReport>>, ApiError> {
    queue_write::run(
        &state,
        request,
        "purge",
        |dlq| Box::pin(async move { dlq.purge().await }),
        |report| {
            let note = report.checkpoint.as_ref().map(ToString::to_string);
            (report.purged as usize, note)
        },
    )
    .await
}
