//! `GET api/consumers`: every consumer found, with the depth of its queues
//! as the broker has them now.

use std::sync::Arc;

use axum::Json;
use axum::extract::State as Shared;

use crate::api_error::ApiError;
use crate::state::State;
use rabbit_backoff_dead_letters::discovery::DiscoveredConsumer;

/// `GET api/consumers`.
pub(crate) async fn consumers(
    Shared(state): Shared<Arc<State>>,
) -> Result<Json<Vec<DiscoveredConsumer>>, ApiError> {
    let mut consumers = state.discover().await?;
    for consumer in &mut consumers {
        state.refresh_depths(consumer).await?;
    }
    Ok(Json(consumers))
}
