//! `GET api/config`: what the page needs to know about the console itself.

use std::sync::Arc;

use axum::Json;
use axum::extract::State as Shared;
use serde::Serialize;

use crate::security::guard::Access;
use crate::state::State;

/// Whether writes are offered, and where they are recorded.
#[derive(Debug, Serialize)]
pub(crate) struct Config {
    read_only: bool,
    /// Where writes are recorded.
    audit_log: Option<String>,
}

/// `GET api/config`.
pub(crate) async fn config(Shared(state): Shared<Arc<State>>) -> Json<Config> {
    Json(Config {
        read_only: state.access == Access::ReadOnly,
        audit_log: state.audit.as_ref().map(|a| a.path().display().to_string()),
    })
}
