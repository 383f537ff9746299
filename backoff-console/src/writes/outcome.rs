//! What every write answers: its report, who did it, and the consumer's
//! depths read from the broker after it.

use axum::Json;
use serde::Serialize;

use crate::api_error::ApiError;
use crate::state::State;
use crate::writes::audit_entry::AuditEntry;
use rabbit_backoff_dead_letters::discovery::DiscoveredConsumer;

/// A write's report (its fields at the top level), `by` and `consumer`.
#[derive(Debug, Serialize)]
pub(crate) struct WriteOutcome<R> {
    /// What it did.
    #[serde(flatten)]
    report: R,
    /// Who did it.
    by: String,
    /// The consumer with its depths as they are after the write.
    consumer: DiscoveredConsumer,
}

/// Records `entry` (the write's outcome in the audit log), then answers
/// with `outcome` and the consumer's depths after it.
pub(crate) async fn answer<R>(
    state: &State,
    who: String,
    entry: &AuditEntry,
    outcome: Result<(R, DiscoveredConsumer), ApiError>,
) -> Result<Json<WriteOutcome<R>>, ApiError> {
    state.record(entry).await?;
    let (report, mut consumer) = outcome?;
    state.refresh_depths(&mut consumer).await?;
    Ok(Json(WriteOutcome {
        report,
        by: who,
        consumer,
    }))
}
