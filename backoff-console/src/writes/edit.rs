//! `POST api/consumers/{queue}/edit`: replays one message with a new body
//! or headers; its history entry keeps the originals.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State as Shared;
use rabbit_backoff_dead_letters::{DeadLetterReport, MessageEdit};
use serde::{Deserialize, Serialize};

use super::message_write::{self, MessageWrite};
use super::outcome::WriteOutcome;
use super::write_request::{WriteBody, WriteRequest};
use crate::api_error::ApiError;
use crate::state::State;

/// The body of an edit: the message and what changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditRequest {
    pub(crate) message_id: String,
    /// The new body, as text; absent to keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    /// User headers to set, as text.
    #[serde(default)]
    set_headers: BTreeMap<String, String>,
    /// User headers to remove.
    #[serde(default)]
    remove_headers: Vec<String>,
}

impl WriteBody for EditRequest {
    const EXPECTED: &'static str =
        r#"{"message_id": "<id>", "body": "…", "set_headers": {}, "remove_headers": []}"#;
}

impl EditRequest {
    /// The edit, or why it is not one.
    pub(crate) fn edit(&self) -> Result<MessageEdit, String> {
        let mut edit = MessageEdit::default();
        if let Some(body) = &self.body {
            edit = edit.body(body.as_bytes().to_vec());
        }
        for (name, value) in &self.set_headers {
            edit = edit.set_header(name, value)?;
        }
        for name in &self.remove_headers {
            edit = edit.remove_header(name)?;
        }
        if edit.is_empty() {
            return Err("the edit changes nothing: replay the message instead".into());
        }
        Ok(edit)
    }
}

/// `POST api/consumers/{queue}/edit`.
pub(crate) async fn edit(
    Shared(state): Shared<Arc<State>>,
    request: WriteRequest<EditRequest>,
) -> Result<Json<WriteOutcome<DeadLetterReport>>, ApiError> {
    message_write::run(&state, request.map(MessageWrite::Edit)).await
}
