//! An edit as its request says it: the message and what changes in it.
//! The edit's handler reads it, and the audit records it as it was sent.

use std::collections::BTreeMap;

use rabbit_backoff_dead_letters::MessageEdit;
use serde::{Deserialize, Serialize};

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
