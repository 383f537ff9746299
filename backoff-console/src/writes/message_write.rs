//! Replay, discard and edit of chosen dead letters: one piece of code, the
//! action apart.

use rabbit_backoff_dead_letters::{DeadLetterReport, ReplayOptions};

use super::outcome::{self, WriteOutcome};
use super::write_request::{WriteBody, WriteRequest};
use crate::api_error::ApiError;
use crate::selection::{Selection, one_message};
use crate::state::State;
use crate::writes::audit_entry::{AuditEntry, AuditSelection, IDS_LISTED};
use crate::writes::edit_request::EditRequest;
use rabbit_backoff_dead_letters::discovery::DiscoveredConsumer;

impl WriteBody for Selection {
    const EXPECTED: &'static str = r#"{"group": "<id>"}, {"message_id": "<id>"}, {"message_ids": ["<id>", …]} or {"matching": {"text": "…", "failed_after": "…", "failed_before": "…", "group": "…"}}"#;
}

/// A change to chosen dead letters.
#[derive(Debug, Clone)]
pub(crate) enum MessageWrite {
    /// Back to the work queue each message failed in.
    Replay(Selection),
    /// Removed for good.
    Discard(Selection),
    /// Replayed with a new body or headers.
    Edit(EditRequest),
}

impl MessageWrite {
    /// Its name in the audit log.
    fn action(&self) -> &'static str {
        match self {
            MessageWrite::Replay(_) => "replay",
            MessageWrite::Discard(_) => "discard",
            MessageWrite::Edit(_) => "edit",
        }
    }

    /// What it applies to, as the request said it.
    fn selection(&self) -> AuditSelection {
        match self {
            MessageWrite::Replay(s) | MessageWrite::Discard(s) => {
                AuditSelection::Selection(s.clone())
            }
            MessageWrite::Edit(e) => AuditSelection::Edit(e.clone()),
        }
    }
}

/// Runs `request` over the dead-letter queue, records it, and answers.
pub(crate) async fn run(
    state: &State,
    request: WriteRequest<MessageWrite>,
) -> Result<axum::Json<WriteOutcome<DeadLetterReport>>, ApiError> {
    let WriteRequest { queue, who, body } = request;
    let outcome = apply(state, &queue, &who, &body).await;
    let mut entry = AuditEntry::new(&who, body.action(), &queue, body.selection());
    match &outcome {
        Ok((report, _)) => {
            entry.count = report.matched.len();
            entry.message_ids = report
                .matched
                .iter()
                .filter_map(|m| m.message_id.clone())
                .take(IDS_LISTED)
                .collect();
            if !report.skipped.is_empty() {
                entry.error = Some(format!(
                    "{} left in place: {}",
                    report.skipped.len(),
                    report
                        .skipped
                        .iter()
                        .map(|s| s.reason.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
        }
        Err(e) => entry.error = Some(e.message().to_owned()),
    }
    outcome::answer(state, who, &entry, outcome).await
}

/// Runs the write over the queue; the report and the consumer.
async fn apply(
    state: &State,
    queue: &str,
    who: &str,
    write: &MessageWrite,
) -> Result<(DeadLetterReport, DiscoveredConsumer), ApiError> {
    let (filter, options) = match write {
        MessageWrite::Replay(selection) | MessageWrite::Discard(selection) => (
            selection.filter().map_err(ApiError::bad_request)?,
            ReplayOptions::default().by(who),
        ),
        MessageWrite::Edit(request) => (
            one_message(&request.message_id),
            ReplayOptions::default()
                .by(who)
                .edit(request.edit().map_err(ApiError::bad_request)?),
        ),
    };
    let discard = matches!(write, MessageWrite::Discard(_));
    let (consumer, report) = state
        .with_dlq(queue, |dlq| {
            Box::pin(async move {
                if discard {
                    dlq.discard(&filter).await
                } else {
                    dlq.replay(&filter, &options).await
                }
            })
        })
        .await?;
    let report = report.map_err(ApiError::broker)?;
    if let MessageWrite::Edit(request) = write
        && report.matched.is_empty()
        && report.skipped.is_empty()
    {
        return Err(ApiError::no_message(&request.message_id));
    }
    Ok((report, consumer))
}
