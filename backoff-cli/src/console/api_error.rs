//! What the JSON API answers when something goes wrong: a status and
//! `{"error": "…"}`, which the page shows as it is.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An error of the JSON API.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    /// An error with this status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// What the page shows.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The broker or its management API failed or refused (502).
    pub fn broker(message: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, format!("the broker: {message}"))
    }

    /// The request names something that does not exist (404).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// The request itself is wrong (400).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}
