//! `GET api/consumers/{queue}/groups`: its dead letters grouped by what
//! went wrong, each with where it was read from.

use std::sync::Arc;

use axum::extract::{Path, State as Shared};
use rabbit_backoff_dead_letters::DeadLetterFilter;

use crate::api_error::ApiError;
use crate::shared_json::SharedJson;
use crate::state::State;
use rabbit_backoff_dead_letters::SourcedGroup;

/// `GET api/consumers/{queue}/groups`.
pub(crate) async fn groups(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
) -> Result<SharedJson<Vec<SourcedGroup>>, ApiError> {
    let key = super::read_key(&queue, &());
    state
        .shared_read(key, queue, |dlq| {
            Box::pin(async move {
                let report = dlq.group_report(&DeadLetterFilter::default()).await;
                Ok(SourcedGroup::all(&report.map_err(ApiError::broker)?))
            })
        })
        .await
}
