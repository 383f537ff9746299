//! `GET api/audit?limit=…`: the newest writes, newest first.

use std::sync::Arc;

use axum::Json;
use axum::extract::State as Shared;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::api_error::ApiError;
use crate::api_query::ApiQuery;
use crate::state::State;
use crate::writes::audit_entry::AuditEntry;

/// How many entries.
#[derive(Debug, Deserialize)]
pub(crate) struct AuditQuery {
    limit: Option<usize>,
}

/// `GET api/audit?limit=…` (50 unless asked, at most 1000).
pub(crate) async fn audit(
    Shared(state): Shared<Arc<State>>,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    let Some(log) = &state.audit else {
        return Ok(Json(Vec::new()));
    };
    let entries = log
        .newest(query.limit.unwrap_or(50).min(1000))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    Ok(Json(entries))
}
