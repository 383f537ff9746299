//! The query string of a read, refused with the API's own error.

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::api_error::ApiError;

/// The query string as a `T`. A malformed one is refused with 400 and the
/// API's `{"error": "…"}`, saying what was wrong (axum's own [`Query`]
/// answers in plain text, which the page could not show).
pub(crate) struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(query) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(e.body_text()))?;
        Ok(ApiQuery(query))
    }
}
