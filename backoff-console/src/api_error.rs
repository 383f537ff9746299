//! What the JSON API answers when something goes wrong: a status and
//! `{"error": "…"}`, which the page shows as it is.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rabbit_backoff_dead_letters::ReplayJobError;
use serde::Serialize;

/// An error of the JSON API.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    /// An error with this status.
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// What the page shows.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The broker or its management API failed or refused (502).
    pub(crate) fn broker(message: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, format!("the broker: {message}"))
    }

    /// The request names something that does not exist (404).
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// No message with this id in the dead-letter queue (404).
    pub(crate) fn no_message(message_id: &str) -> Self {
        Self::not_found(format!(
            "no message with the id `{message_id}` in the dead-letter queue"
        ))
    }

    /// The request itself is wrong (400).
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// Why a replay job could not start, go on or be controlled: a plan
    /// that makes no sense (400), a job not in the replay log (404),
    /// another job running, a job ended or one that cannot do what was
    /// asked (409), the broker (502).
    pub(crate) fn replay_job(error: ReplayJobError) -> Self {
        let status = match &error {
            ReplayJobError::Plan(_) => StatusCode::BAD_REQUEST,
            ReplayJobError::Unknown { .. } => StatusCode::NOT_FOUND,
            ReplayJobError::Busy { .. }
            | ReplayJobError::Ended { .. }
            | ReplayJobError::Refused(_) => StatusCode::CONFLICT,
            ReplayJobError::Broker(e) => return Self::broker(e),
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, error.to_string())
    }
}

/// The body of an error: `{"error": "…"}`.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: &self.message,
        };
        (self.status, Json(body)).into_response()
    }
}
