//! `GET api/consumers/{queue}/body?message_id=…`: a message's whole body,
//! to edit it.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State as Shared};
use rabbit_backoff_runtime::transport::Delivery;
use serde::{Deserialize, Serialize};

use crate::api_error::ApiError;
use crate::api_query::ApiQuery;
use crate::selection::one_message;
use crate::state::State;

/// Which message.
#[derive(Debug, Deserialize)]
pub(crate) struct BodyQuery {
    message_id: String,
}

/// A message's whole body.
#[derive(Debug, Serialize)]
pub(crate) struct Body {
    message_id: String,
    /// The body as text (invalid UTF-8 replaced).
    body: String,
    /// Whether it is valid UTF-8 (only then can it be edited as text).
    utf8: bool,
    len: usize,
}

/// `GET api/consumers/{queue}/body?message_id=…`.
pub(crate) async fn body(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
    ApiQuery(query): ApiQuery<BodyQuery>,
) -> Result<Json<Body>, ApiError> {
    let filter = one_message(&query.message_id);
    let (_, found) = state
        .with_dlq(&queue, |dlq| {
            Box::pin(async move {
                let mut found = None;
                let mut visit = |delivery: &Delivery, _: &_| {
                    found = Some(delivery.data.clone());
                    Ok(())
                };
                dlq.visit(&filter, &mut visit).await.map(|_| found)
            })
        })
        .await?;
    let data = found
        .map_err(ApiError::broker)?
        .ok_or_else(|| ApiError::no_message(&query.message_id))?;
    Ok(Json(Body {
        message_id: query.message_id,
        utf8: std::str::from_utf8(&data).is_ok(),
        len: data.len(),
        body: String::from_utf8_lossy(&data).into_owned(),
    }))
}
