//! A read's result shared by the reads in flight, answered as JSON.

use std::sync::Arc;

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A shared `T`, answered as `Json(T)` without copying it.
pub(crate) struct SharedJson<T>(pub(crate) Arc<T>);

impl<T: Serialize> IntoResponse for SharedJson<T> {
    fn into_response(self) -> Response {
        Json(&*self.0).into_response()
    }
}
