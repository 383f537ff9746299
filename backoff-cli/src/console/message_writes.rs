//! The JSON API's writes to chosen dead letters: replay, discard and edit.
//! Each is a POST the guard let through with a token, refused in read-only
//! mode, run one at a time with every other pass over the queue, and
//! recorded in the audit log, with its outcome, before it answers.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use rabbit_backoff::dead_letters::{
    DeadLetterFilter, DeadLetterReport, MessageEdit, ReplayOptions,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use super::api_error::ApiError;
use super::audit::{AuditEntry, IDS_LISTED};
use super::guard::Operator;
use super::selection::Selection;
use super::state::Console;
use crate::discovery::DiscoveredConsumer;

/// What a write answers: its report, and the consumer's depths read from
/// the broker after it.
#[derive(Debug, Serialize)]
pub(super) struct WriteOutcome {
    #[serde(flatten)]
    report: DeadLetterReport,
    /// Who did it.
    by: String,
    /// The consumer with its depths as they are after the write.
    consumer: DiscoveredConsumer,
}

/// `POST /api/consumers/{queue}/replay` with a [`Selection`]: back to the
/// work queue each message failed in, each confirmed before it leaves.
pub(super) async fn replay(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    operator: Option<Extension<Operator>>,
    selection: Result<Json<Selection>, JsonRejection>,
) -> Result<Json<WriteOutcome>, ApiError> {
    let selection = read_selection(selection)?;
    console
        .write(&queue, operator, Write::Replay(selection))
        .await
}

/// `POST /api/consumers/{queue}/discard` with a [`Selection`]: removed for good.
pub(super) async fn discard(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    operator: Option<Extension<Operator>>,
    selection: Result<Json<Selection>, JsonRejection>,
) -> Result<Json<WriteOutcome>, ApiError> {
    let selection = read_selection(selection)?;
    console
        .write(&queue, operator, Write::Discard(selection))
        .await
}

/// The body of an edit: the message and what changes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EditRequest {
    message_id: String,
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
    fn edit(&self) -> Result<MessageEdit, String> {
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

/// `POST /api/consumers/{queue}/edit`: replays one message with a new body
/// or headers; its history entry keeps the originals.
pub(super) async fn edit(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    operator: Option<Extension<Operator>>,
    request: Result<Json<EditRequest>, JsonRejection>,
) -> Result<Json<WriteOutcome>, ApiError> {
    let Json(request) = request.map_err(|e| {
        ApiError::bad_request(format!(
            "{}; send {{\"message_id\": \"<id>\", \"body\": \"…\", \"set_headers\": {{}}, \"remove_headers\": []}}",
            e.body_text()
        ))
    })?;
    console.write(&queue, operator, Write::Edit(request)).await
}

fn read_selection(
    selection: Result<Json<Selection>, JsonRejection>,
) -> Result<Selection, ApiError> {
    selection.map(|Json(s)| s).map_err(|e| {
        ApiError::bad_request(format!(
            "{}; send {{\"group\": \"<id>\"}}, {{\"message_id\": \"<id>\"}}, {{\"message_ids\": [\"<id>\", …]}} or {{\"matching\": {{\"text\": \"…\", \"failed_after\": \"…\", \"failed_before\": \"…\", \"group\": \"…\"}}}}",
            e.body_text()
        ))
    })
}

/// A change to a dead-letter queue.
#[derive(Debug, Clone)]
pub(super) enum Write {
    Replay(Selection),
    Discard(Selection),
    Edit(EditRequest),
}

impl Write {
    fn action(&self) -> &'static str {
        match self {
            Write::Replay(_) => "replay",
            Write::Discard(_) => "discard",
            Write::Edit(_) => "edit",
        }
    }

    fn selection(&self) -> serde_json::Value {
        match self {
            Write::Replay(s) | Write::Discard(s) => serde_json::to_value(s),
            Write::Edit(e) => serde_json::to_value(e),
        }
        .unwrap_or(serde_json::Value::Null)
    }
}

impl Console {
    async fn write(
        &self,
        queue: &str,
        operator: Option<Extension<Operator>>,
        write: Write,
    ) -> Result<Json<WriteOutcome>, ApiError> {
        let who = self.writer(operator)?;
        let outcome = self.apply(queue, &who, &write).await;
        let entry = AuditEntry {
            at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            who: who.clone(),
            action: write.action().to_owned(),
            queue: queue.to_owned(),
            selection: write.selection(),
            count: outcome.as_ref().map_or(0, |(r, _)| r.matched.len()),
            message_ids: outcome.as_ref().map_or_else(
                |_| Vec::new(),
                |(r, _)| {
                    r.matched
                        .iter()
                        .filter_map(|m| m.message_id.clone())
                        .take(IDS_LISTED)
                        .collect()
                },
            ),
            error: match &outcome {
                Err(e) => Some(e.message().to_owned()),
                Ok((r, _)) if !r.skipped.is_empty() => Some(format!(
                    "{} left in place: {}",
                    r.skipped.len(),
                    r.skipped
                        .iter()
                        .map(|s| s.reason.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                )),
                Ok(_) => None,
            },
            note: None,
        };
        self.record(&entry).await?;
        let (report, mut consumer) = outcome?;
        self.refresh_depths(&mut consumer).await?;
        Ok(Json(WriteOutcome {
            report,
            by: who,
            consumer,
        }))
    }

    /// Runs the write over the queue; the report and the consumer.
    async fn apply(
        &self,
        queue: &str,
        who: &str,
        write: &Write,
    ) -> Result<(DeadLetterReport, DiscoveredConsumer), ApiError> {
        let (filter, options) = match write {
            Write::Replay(selection) | Write::Discard(selection) => (
                selection.filter().map_err(ApiError::bad_request)?,
                ReplayOptions::default().by(who),
            ),
            Write::Edit(request) => (
                DeadLetterFilter::default()
                    .message_id(request.message_id.clone())
                    .limit(1),
                ReplayOptions::default()
                    .by(who)
                    .edit(request.edit().map_err(ApiError::bad_request)?),
            ),
        };
        let _one_at_a_time = self.lock(queue).await;
        let (consumer, dlq) = self.dlq(queue).await?;
        let report = match write {
            Write::Discard(_) => dlq.discard(&filter).await,
            Write::Replay(_) | Write::Edit(_) => dlq.replay(&filter, &options).await,
        };
        dlq.close().await;
        let report = report.map_err(ApiError::broker)?;
        if let Write::Edit(request) = write
            && report.matched.is_empty()
            && report.skipped.is_empty()
        {
            return Err(ApiError::not_found(format!(
                "no message with the id `{}` in the dead-letter queue",
                request.message_id
            )));
        }
        Ok((report, consumer))
    }
}
