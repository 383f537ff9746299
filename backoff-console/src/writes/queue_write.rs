//! Writes to a dead-letter queue as a whole, its purge and the rebuild of
//! its index: one piece of code, the call and what the audit notes apart.

use serde::Deserialize;

use super::outcome::{self, WriteOutcome};
use super::write_request::{WriteBody, WriteRequest};
use crate::api_error::ApiError;
use crate::state::{DlqCall, State};
use crate::writes::audit_entry::{AuditEntry, AuditSelection, WholeQueue};

/// The body of a purge or a rebuild: an empty JSON object (the page has
/// asked for a confirmation before sending it).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueueWriteRequest {}

impl WriteBody for QueueWriteRequest {
    const EXPECTED: &'static str = "{}";
}

/// Runs `call` on the dead-letter queue, records `action` with what
/// `note` says of its report (how many, and a note), and answers.
pub(crate) async fn run<R>(
    state: &State,
    request: WriteRequest<QueueWriteRequest>,
    action: &str,
    call: impl for<'a> FnOnce(
        &'a rabbit_backoff_dead_letters::Dlq,
    ) -> DlqCall<'a, Result<R, rabbit_backoff_runtime::Error>>,
    note: impl FnOnce(&R) -> (usize, Option<String>),
) -> Result<axum::Json<WriteOutcome<R>>, ApiError> {
    let WriteRequest { queue, who, .. } = request;
    let outcome = match state.with_dlq(&queue, call).await {
        Ok((consumer, result)) => result
            .map(|report| (report, consumer))
            .map_err(ApiError::broker),
        Err(e) => Err(e),
    };
    let dead_letter_queue = outcome
        .as_ref()
        .ok()
        .map(|(_, c)| c.spec.names().dead_letter_queue.clone());
    let mut entry = AuditEntry::new(
        &who,
        action,
        &queue,
        AuditSelection::Queue(WholeQueue { dead_letter_queue }),
    );
    match &outcome {
        Ok((report, _)) => (entry.count, entry.note) = note(report),
        Err(e) => entry.error = Some(e.message().to_owned()),
    }
    outcome::answer(state, who, &entry, outcome).await
}
