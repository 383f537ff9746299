//! What every write starts from: the consumer's work queue from the path,
//! who sent it (the name of its token), and its JSON body, refused with the
//! API's own error and the shape it should have had.

use std::sync::Arc;

use axum::Json;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use serde::de::DeserializeOwned;

use crate::api_error::ApiError;
use crate::security::guard::Operator;
use crate::state::State;

/// The body of a write, and what to send instead of a malformed one.
pub(crate) trait WriteBody: DeserializeOwned {
    /// The shape expected, shown after the parser's complaint.
    const EXPECTED: &'static str;
}

/// A write to the dead-letter queue of `queue`, by `who`.
#[derive(Debug)]
pub(crate) struct WriteRequest<T> {
    /// The consumer's work queue.
    pub(crate) queue: String,
    /// The name of the token it came with.
    pub(crate) who: String,
    /// What it asks for.
    pub(crate) body: T,
}

impl<T> WriteRequest<T> {
    /// The same write with its body turned into `U`.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> WriteRequest<U> {
        WriteRequest {
            queue: self.queue,
            who: self.who,
            body: f(self.body),
        }
    }
}

impl<T: WriteBody> FromRequest<Arc<State>> for WriteRequest<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Arc<State>) -> Result<Self, ApiError> {
        let (mut parts, body) = request.into_parts();
        // The queue among the path's parameters (a job's path names its id too).
        let Path(parameters) = Path::<Vec<(String, String)>>::from_request_parts(&mut parts, state)
            .await
            .map_err(|e| ApiError::bad_request(e.body_text()))?;
        let queue = parameters
            .into_iter()
            .find_map(|(name, value)| (name == "queue").then_some(value))
            .ok_or_else(|| ApiError::bad_request("the path names no consumer's work queue"))?;
        let who = state.writer(parts.extensions.get::<Operator>())?;
        let request = Request::from_parts(parts, body);
        let Json(body) = Json::<T>::from_request(request, state).await.map_err(|e| {
            ApiError::bad_request(format!("{}; send {}", e.body_text(), T::EXPECTED))
        })?;
        Ok(WriteRequest { queue, who, body })
    }
}
