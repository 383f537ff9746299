//! Writes to a dead-letter queue as a whole: its purge, and the rebuild of
//! its index. Both are POSTs behind the same guard as a discard (the token,
//! the console's own page, JSON), refused in read-only mode, run one at a
//! time with every other pass over the queue, and audited: who, when, what
//! and how many, with the checkpoint each left in the dead-letter index.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use rabbit_backoff::dead_letters::{GroupReport, PurgeReport};
use serde::{Deserialize, Serialize};

use super::api_error::ApiError;
use super::audit::AuditEntry;
use super::guard::Operator;
use super::state::Console;
use crate::discovery::DiscoveredConsumer;

/// The body of a purge or a rebuild: an empty JSON object (the page has
/// asked for a confirmation before sending it).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueWriteRequest {}

/// What a purge answers.
#[derive(Debug, Serialize)]
pub struct PurgeOutcome {
    /// How many messages left, and the checkpoint left in the index.
    #[serde(flatten)]
    report: PurgeReport,
    /// Who did it.
    by: String,
    /// The consumer with its depths as they are after the purge.
    consumer: DiscoveredConsumer,
}

/// What a rebuild of the index answers.
#[derive(Debug, Serialize)]
pub struct RebuildOutcome {
    /// The groups the pass saw, and the checkpoint it left.
    #[serde(flatten)]
    report: GroupReport,
    /// [`GroupReport::reason`].
    source_reason: String,
    /// Who did it.
    by: String,
    /// The consumer with its depths as they are after the rebuild.
    consumer: DiscoveredConsumer,
}

/// `POST /api/consumers/{queue}/purge` with `{}`: every ready message of
/// the dead-letter queue removed at once ([`rabbit_backoff::dead_letters::Dlq::purge`]),
/// an empty checkpoint left in its index.
pub async fn purge(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    operator: Option<Extension<Operator>>,
    request: Result<Json<QueueWriteRequest>, JsonRejection>,
) -> Result<Json<PurgeOutcome>, ApiError> {
    let who = console.writer(operator)?;
    read_request(request)?;
    let outcome = run(&console, &queue, |dlq| {
        Box::pin(async move { dlq.purge().await })
    })
    .await;
    let mut entry = entry(&who, "purge", &queue, outcome.as_ref().map(|(_, c)| c));
    match &outcome {
        Ok((report, _)) => {
            entry.count = report.purged as usize;
            entry.note = report.checkpoint.as_ref().map(ToString::to_string);
        }
        Err(e) => entry.error = Some(e.message().to_owned()),
    }
    console.record(&entry).await?;
    let (report, mut consumer) = outcome?;
    console.refresh_depths(&mut consumer).await?;
    Ok(Json(PurgeOutcome {
        report,
        by: who,
        consumer,
    }))
}

/// `POST /api/consumers/{queue}/rebuild-index` with `{}`: a pass over the
/// dead-letter queue that leaves a checkpoint in its index
/// ([`rabbit_backoff::dead_letters::Dlq::rebuild_index`]), so that the groups are read
/// from the index again.
pub async fn rebuild_index(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    operator: Option<Extension<Operator>>,
    request: Result<Json<QueueWriteRequest>, JsonRejection>,
) -> Result<Json<RebuildOutcome>, ApiError> {
    let who = console.writer(operator)?;
    read_request(request)?;
    let outcome = run(&console, &queue, |dlq| {
        Box::pin(async move { dlq.rebuild_index().await })
    })
    .await;
    let mut entry = entry(
        &who,
        "rebuild-index",
        &queue,
        outcome.as_ref().map(|(_, c)| c),
    );
    match &outcome {
        Ok((report, _)) => {
            entry.count = report.groups.iter().map(|g| g.count).sum();
            entry.note = Some(report.reason());
        }
        Err(e) => entry.error = Some(e.message().to_owned()),
    }
    console.record(&entry).await?;
    let (report, mut consumer) = outcome?;
    console.refresh_depths(&mut consumer).await?;
    Ok(Json(RebuildOutcome {
        source_reason: report.reason(),
        report,
        by: who,
        consumer,
    }))
}

fn read_request(request: Result<Json<QueueWriteRequest>, JsonRejection>) -> Result<(), ApiError> {
    request
        .map(|_| ())
        .map_err(|e| ApiError::bad_request(format!("{}; send {{}}", e.body_text())))
}

/// A call on the dead-letter queue of `queue`.
type DlqCall<'a, T> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<T, rabbit_backoff::Error>> + Send + 'a>,
>;

/// Runs `call` on the dead-letter queue of `queue`, one at a time with the
/// other passes over it; its result and the consumer.
async fn run<T>(
    console: &Console,
    queue: &str,
    call: impl for<'a> FnOnce(&'a rabbit_backoff::dead_letters::Dlq) -> DlqCall<'a, T>,
) -> Result<(T, DiscoveredConsumer), ApiError> {
    let _one_at_a_time = console.lock(queue).await;
    let (consumer, dlq) = console.dlq(queue).await?;
    let result = call(&dlq).await;
    dlq.close().await;
    Ok((result.map_err(ApiError::broker)?, consumer))
}

/// The audit entry of `action` on `queue` by `who`, before its outcome is
/// known: what it applied to is the whole dead-letter queue.
fn entry(
    who: &str,
    action: &str,
    queue: &str,
    consumer: Result<&DiscoveredConsumer, &ApiError>,
) -> AuditEntry {
    let dead_letter_queue = consumer
        .ok()
        .map(|c| c.spec.names().dead_letter_queue.clone());
    AuditEntry {
        at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        who: who.to_owned(),
        action: action.to_owned(),
        queue: queue.to_owned(),
        selection: serde_json::json!({ "dead_letter_queue": dead_letter_queue }),
        count: 0,
        message_ids: Vec::new(),
        error: None,
        note: None,
    }
}
