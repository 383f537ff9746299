//! `POST api/consumers/{queue}/replay` with a selection: back to the work
//! queue each message failed in, each copy confirmed before its original
//! leaves.

use std::sync::Arc;

use axum::Json;
use axum::extract::State as Shared;
use rabbit_backoff_dead_letters::DeadLetterReport;

use super::message_write::{self, MessageWrite};
use super::outcome::WriteOutcome;
use super::write_request::WriteRequest;
use crate::api_error::ApiError;
use crate::selection::Selection;
use crate::state::State;

/// `POST api/consumers/{queue}/replay`.
pub(crate) async fn replay(
    Shared(state): Shared<Arc<State>>,
    request: WriteRequest<Selection>,
) -> Result<Json<WriteOutcome<DeadLetterReport>>, ApiError> {
    message_write::run(&state, request.map(MessageWrite::Replay)).await
}
