//! `GET api/consumers/{queue}/messages?group=…|message_id=…&limit=…`:
//! messages with their headers and the start of their body, left in place
//! (the report of a peek: `matched`, `kept`).

use std::sync::Arc;

use axum::extract::{Path, State as Shared};
use rabbit_backoff_dead_letters::{DeadLetterFilter, DeadLetterReport};
use serde::{Deserialize, Serialize};

use super::{MAX_LISTED, listed};
use crate::api_error::ApiError;
use crate::api_query::ApiQuery;
use crate::shared_json::SharedJson;
use crate::state::State;

/// The query of a message listing: one group, or one message.
#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct MessageQuery {
    group: Option<String>,
    message_id: Option<String>,
    limit: Option<usize>,
}

/// `GET api/consumers/{queue}/messages`.
pub(crate) async fn messages(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
    ApiQuery(query): ApiQuery<MessageQuery>,
) -> Result<SharedJson<DeadLetterReport>, ApiError> {
    let key = super::read_key(&queue, &query);
    let mut filter = DeadLetterFilter::default();
    if let Some(group) = query.group {
        filter = filter.group(group);
    }
    if let Some(id) = query.message_id {
        filter = filter.message_id(id);
    }
    filter = filter.limit(listed(query.limit, MAX_LISTED));
    state
        .shared_read(key, queue, |dlq| {
            Box::pin(async move { dlq.peek(&filter).await.map_err(ApiError::broker) })
        })
        .await
}
