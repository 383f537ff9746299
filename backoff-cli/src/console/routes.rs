//! The JSON API and the page's files. Reads are GETs and change nothing;
//! replay and discard are POSTs, which the guard lets through only with the
//! token, from the console's own page.

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router, middleware};
use rabbit_backoff::{DeadLetterFilter, DeadLetterGroup, DeadLetterReport, Dlq, ReplayOptions};
use serde::{Deserialize, Serialize};

use super::api_error::ApiError;
use super::assets;
use super::guard::{self, Access, Guard};
use super::security_headers;
use super::selection::Selection;
use crate::discovery::{self, DiscoveredConsumer};

/// The most messages one listing returns.
const MAX_LISTED: usize = 500;
/// How many messages a listing returns unless asked.
const DEFAULT_LISTED: usize = 50;

/// What the handlers need: where the broker and its management API are.
#[derive(Debug)]
pub struct Console {
    /// The AMQP address.
    pub amqp_url: String,
    /// The management API's address.
    pub management_url: String,
    /// Whether writes are allowed.
    pub access: Access,
    /// Held through every dead-letter operation. A scan holds the messages
    /// it has read until it ends, so a replay beside a scan of the same
    /// queue (the page refreshing its groups) would miss them: this console
    /// runs one at a time.
    pub scans: tokio::sync::Mutex<()>,
}

/// The whole application: pages, API, guard and security headers.
pub fn router(console: Arc<Console>, guard: Arc<Guard>) -> Router {
    Router::new()
        .route("/", get(assets::page))
        .route("/console.js", get(assets::script))
        .route("/console.css", get(assets::style))
        .route("/api/config", get(config))
        .route("/api/consumers", get(consumers))
        .route("/api/consumers/{queue}/groups", get(groups))
        .route("/api/consumers/{queue}/messages", get(messages))
        .route("/api/consumers/{queue}/replay", post(replay))
        .route("/api/consumers/{queue}/discard", post(discard))
        .with_state(console)
        .layer(middleware::from_fn_with_state(guard, guard::enforce))
        .layer(middleware::map_response(security_headers::add))
}

/// What the page needs to know about the console itself.
#[derive(Serialize)]
struct Config {
    read_only: bool,
}

/// `GET /api/config`.
async fn config(State(console): State<Arc<Console>>) -> Json<Config> {
    Json(Config {
        read_only: console.access == Access::ReadOnly,
    })
}

/// `GET /api/consumers`: every consumer found, with the depth of its queues.
async fn consumers(
    State(console): State<Arc<Console>>,
) -> Result<Json<Vec<DiscoveredConsumer>>, ApiError> {
    Ok(Json(console.discover().await?))
}

/// `GET /api/consumers/{queue}/groups`: its dead letters grouped by what went wrong.
async fn groups(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
) -> Result<Json<Vec<DeadLetterGroup>>, ApiError> {
    let _one_at_a_time = console.scans.lock().await;
    let dlq = console.dlq(&queue).await?;
    let groups = dlq.groups(&DeadLetterFilter::default()).await;
    dlq.close().await;
    Ok(Json(groups.map_err(ApiError::broker)?))
}

/// The query of a message listing: one group, or one message.
#[derive(Debug, Deserialize)]
struct MessageQuery {
    group: Option<String>,
    message_id: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/consumers/{queue}/messages?group=…|message_id=…&limit=…`:
/// messages with their headers and the start of their body, left in place.
async fn messages(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    query: Result<Query<MessageQuery>, QueryRejection>,
) -> Result<Json<DeadLetterReport>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let mut filter = DeadLetterFilter::default();
    if let Some(group) = query.group {
        filter = filter.group(group);
    }
    if let Some(id) = query.message_id {
        filter = filter.message_id(id);
    }
    filter = filter.limit(query.limit.unwrap_or(DEFAULT_LISTED).min(MAX_LISTED));
    let _one_at_a_time = console.scans.lock().await;
    let dlq = console.dlq(&queue).await?;
    let report = dlq.peek(&filter).await;
    dlq.close().await;
    Ok(Json(report.map_err(ApiError::broker)?))
}

/// `POST /api/consumers/{queue}/replay` with a [`Selection`]: back to the
/// work queue each message failed in, each confirmed before it leaves.
async fn replay(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    selection: Result<Json<Selection>, JsonRejection>,
) -> Result<Json<DeadLetterReport>, ApiError> {
    console.write(&queue, selection, Write::Replay).await
}

/// `POST /api/consumers/{queue}/discard` with a [`Selection`]: removed for good.
async fn discard(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    selection: Result<Json<Selection>, JsonRejection>,
) -> Result<Json<DeadLetterReport>, ApiError> {
    console.write(&queue, selection, Write::Discard).await
}

/// A change to a dead-letter queue.
#[derive(Debug, Clone, Copy)]
enum Write {
    Replay,
    Discard,
}

impl Console {
    async fn discover(&self) -> Result<Vec<DiscoveredConsumer>, ApiError> {
        discovery::discover_async(&self.amqp_url, &self.management_url)
            .await
            .map_err(ApiError::broker)
    }

    /// The dead-letter queue of the consumer whose work queue is `queue`.
    async fn dlq(&self, queue: &str) -> Result<Dlq, ApiError> {
        let consumer = self
            .discover()
            .await?
            .into_iter()
            .find(|c| c.queue == queue)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "no consumer with the work queue `{queue}` was found"
                ))
            })?;
        Dlq::connect(&self.amqp_url, &consumer.spec)
            .await
            .map_err(ApiError::broker)
    }

    async fn write(
        &self,
        queue: &str,
        selection: Result<Json<Selection>, JsonRejection>,
        write: Write,
    ) -> Result<Json<DeadLetterReport>, ApiError> {
        // The guard refuses writes to a read-only console already; this is
        // the second lock on the same door.
        if self.access == Access::ReadOnly {
            return Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                guard::Refusal::ReadOnly.message(),
            ));
        }
        let Json(selection) = selection.map_err(|e| {
            ApiError::bad_request(format!(
                "{}; send {{\"group\": \"<id>\"}} or {{\"message_id\": \"<id>\"}}",
                e.body_text()
            ))
        })?;
        let _one_at_a_time = self.scans.lock().await;
        let dlq = self.dlq(queue).await?;
        let filter = selection.filter();
        let report = match write {
            Write::Replay => dlq.replay(&filter, &ReplayOptions::default()).await,
            Write::Discard => dlq.discard(&filter).await,
        };
        dlq.close().await;
        Ok(Json(report.map_err(ApiError::broker)?))
    }
}
