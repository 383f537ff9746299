//! `POST api/consumers/{queue}/edit`: replays one message with a new body
//! or headers; its history entry keeps the originals.

use std::sync::Arc;

use axum::Json;
use axum::extract::State as Shared;
use rabbit_backoff_dead_letters::DeadLetterReport;

use super::message_write::{self, MessageWrite};
use super::outcome::WriteOutcome;
use super::write_request::{WriteBody, WriteRequest};
use crate::api_error::ApiError;
use crate::state::State;
use crate::writes::edit_request::EditRequest;

impl WriteBody for EditRequest {
    const EXPECTED: &'static str =
        r#"{"message_id": "<id>", "body": "…", "set_headers": {}, "remove_headers": []}"#;
}

/// `POST api/consumers/{queue}/edit`.
pub(crate) async fn edit(
    Shared(state): Shared<Arc<State>>,
    request: WriteRequest<EditRequest>,
) -> Result<Json<WriteOutcome<DeadLetterReport>>, ApiError> {
    message_write::run(&state, request.map(MessageWrite::Edit)).await
}
