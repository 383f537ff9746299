//! The JSON API's reads: GETs that change nothing. A read of a dead-letter
//! queue runs one at a time with the other passes over it, and equal reads
//! in flight share one ([`Console::shared_read`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::IntoResponse;
use rabbit_backoff::dead_letters::{
    DeadLetterFilter, DeadLetterGroup, DeadLetterMessage, GroupSource, GroupTally,
};
use rabbit_backoff::{QueueType, TierListing};
use serde::{Deserialize, Serialize};

use super::api_error::ApiError;
use super::api_query::ApiQuery;
use super::audit::AuditEntry;
use super::guard::Access;
use super::selection::Search;
use super::state::Console;
use super::timeline::{Chart, Timeline};
use crate::discovery::DiscoveredConsumer;
use crate::group_source;

/// The most messages one listing returns.
const MAX_LISTED: usize = 500;
/// How many messages a listing returns unless asked.
const DEFAULT_LISTED: usize = 50;
/// The most messages listed per retry tier.
const MAX_TIER_LISTED: usize = 200;

/// What the page needs to know about the console itself.
#[derive(Serialize)]
pub(super) struct Config {
    read_only: bool,
    /// Where writes are recorded.
    audit_log: Option<String>,
}

/// `GET /api/config`.
pub(super) async fn config(State(console): State<Arc<Console>>) -> Json<Config> {
    Json(Config {
        read_only: console.access == Access::ReadOnly,
        audit_log: console
            .audit
            .as_ref()
            .map(|a| a.path().display().to_string()),
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct AuditQuery {
    limit: Option<usize>,
}

/// `GET /api/audit?limit=…`: the newest writes, newest first.
pub(super) async fn audit(
    State(console): State<Arc<Console>>,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    let Some(log) = &console.audit else {
        return Ok(Json(Vec::new()));
    };
    let entries = log
        .newest(query.limit.unwrap_or(50).min(1000))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    Ok(Json(entries))
}

/// `GET /api/consumers`: every consumer found, with the depth of its
/// queues as the broker has them now.
pub(super) async fn consumers(
    State(console): State<Arc<Console>>,
) -> Result<Json<Vec<DiscoveredConsumer>>, ApiError> {
    let mut consumers = console.discover().await?;
    for consumer in &mut consumers {
        console.refresh_depths(consumer).await?;
    }
    Ok(Json(consumers))
}

/// `GET /api/consumers/{queue}/groups`: its dead letters grouped by what went wrong.
pub(super) async fn groups(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let key = format!("groups\0{queue}");
    console
        .shared_read(key, queue, |dlq| {
            Box::pin(async move {
                let report = dlq.group_report(&DeadLetterFilter::default()).await;
                to_value(&group_source::sourced(&report.map_err(ApiError::broker)?))
            })
        })
        .await
}

/// The query of a message listing: one group, or one message.
#[derive(Debug, Deserialize, Serialize)]
pub(super) struct MessageQuery {
    group: Option<String>,
    message_id: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/consumers/{queue}/messages?group=…|message_id=…&limit=…`:
/// messages with their headers and the start of their body, left in place.
pub(super) async fn messages(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    ApiQuery(query): ApiQuery<MessageQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let key = format!("messages\0{queue}\0{}", to_value(&query)?);
    let mut filter = DeadLetterFilter::default();
    if let Some(group) = query.group {
        filter = filter.group(group);
    }
    if let Some(id) = query.message_id {
        filter = filter.message_id(id);
    }
    filter = filter.limit(query.limit.unwrap_or(DEFAULT_LISTED).min(MAX_LISTED));
    console
        .shared_read(key, queue, |dlq| {
            Box::pin(async move { to_value(&dlq.peek(&filter).await.map_err(ApiError::broker)?) })
        })
        .await
}

/// The query of the dead-letters view: a search and a page.
#[derive(Debug, Deserialize, Serialize)]
pub(super) struct ViewQuery {
    #[serde(flatten)]
    search: Search,
    offset: Option<usize>,
    limit: Option<usize>,
}

/// Everything the page shows of a dead-letter queue, from one pass.
#[derive(Debug, Serialize)]
pub(super) struct DeadLetterView {
    /// Which pass of this console read it: equal reads in flight share one.
    pass: u64,
    /// Messages in the queue.
    depth: usize,
    /// The groups of the messages the search (without its group) matches.
    groups: Vec<DeadLetterGroup>,
    /// Where the groups were read from: `index` or `pass`.
    groups_source: GroupSource,
    /// Why, in a few words ([`rabbit_backoff::dead_letters::GroupReport::reason`], or why a search is
    /// grouped by the pass that reads its messages).
    groups_source_reason: String,
    /// Those messages per group over time.
    chart: Chart,
    /// Messages the whole search (group included) matches.
    total: usize,
    /// Where the page starts among them.
    offset: usize,
    /// The page: at most `limit` of them, in queue order.
    messages: Vec<DeadLetterMessage>,
}

/// Why the groups of a search come from the view's own pass.
const SEARCH_GROUPED_BY_ITS_PASS: &str =
    "a search is grouped by the pass that reads its messages for the page and the chart";

/// `GET /api/consumers/{queue}/dead-letters?text=…&failed_after=…&failed_before=…&group=…&offset=…&limit=…`:
/// groups, chart, the number of matches and one page of them, from one pass
/// over the queue; equal reads in flight share it. Without a search (text
/// or times), the groups are read through [`Dlq::group_report`] first: from
/// the dead-letter index when it is in step, else with a pass that leaves
/// it a checkpoint; with a search, from the view's own pass.
pub(super) async fn dead_letters(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    ApiQuery(query): ApiQuery<ViewQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let key = format!("view\0{queue}\0{}", to_value(&query)?);
    let wide = query
        .search
        .without_group()
        .filter()
        .map_err(ApiError::bad_request)?;
    let searching = query.search.without_group() != Search::default();
    let group = query.search.group.clone().filter(|g| !g.is_empty());
    let offset = query.offset.unwrap_or(0);
    let limit = query.limit.unwrap_or(DEFAULT_LISTED).min(MAX_LISTED);
    let passes = Arc::clone(&console);
    console
        .shared_read(key, queue, |dlq| {
            Box::pin(async move {
                let pass = passes
                    .passes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                let report = if searching {
                    None
                } else {
                    let report = dlq.group_report(&DeadLetterFilter::default()).await;
                    Some(report.map_err(ApiError::broker)?)
                };
                let mut tally = GroupTally::default();
                let mut timeline = Timeline::default();
                let mut total = 0;
                let mut page = Vec::new();
                let mut visit = |_: &_, message: &DeadLetterMessage| {
                    tally.add(message);
                    timeline.add(&message.group, message.failed_at.as_deref());
                    if group.as_ref().is_none_or(|g| *g == message.group) {
                        if total >= offset && page.len() < limit {
                            page.push(message.clone());
                        }
                        total += 1;
                    }
                    Ok(())
                };
                let visited = dlq.visit(&wide, &mut visit).await;
                let visited = visited.map_err(ApiError::broker)?;
                let depth = visited.kept;
                let (groups, groups_source, groups_source_reason) = match report {
                    Some(report) => {
                        let reason = report.reason();
                        (report.groups, report.source, reason)
                    }
                    None => (
                        tally.into_groups(),
                        GroupSource::Pass,
                        SEARCH_GROUPED_BY_ITS_PASS.to_owned(),
                    ),
                };
                to_value(&DeadLetterView {
                    pass,
                    depth,
                    groups,
                    groups_source,
                    groups_source_reason,
                    chart: timeline.chart(),
                    total,
                    offset,
                    messages: page,
                })
            })
        })
        .await
}

#[derive(Debug, Deserialize)]
pub(super) struct BodyQuery {
    message_id: String,
}

/// A message's whole body, to edit it.
#[derive(Debug, Serialize)]
pub(super) struct Body {
    message_id: String,
    /// The body as text (invalid UTF-8 replaced).
    body: String,
    /// Whether it is valid UTF-8 (only then can it be edited as text).
    utf8: bool,
    len: usize,
}

/// `GET /api/consumers/{queue}/body?message_id=…`.
pub(super) async fn body(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    ApiQuery(query): ApiQuery<BodyQuery>,
) -> Result<Json<Body>, ApiError> {
    let _one_at_a_time = console.lock(&queue).await;
    let dlq = console.dlq(&queue).await?.1;
    let filter = DeadLetterFilter::default()
        .message_id(query.message_id.clone())
        .limit(1);
    let mut found = None;
    let mut visit = |delivery: &rabbit_backoff::transport::Delivery, _: &_| {
        found = Some(delivery.data.clone());
        Ok(())
    };
    let report = dlq.visit(&filter, &mut visit).await;
    dlq.close().await;
    report.map_err(ApiError::broker)?;
    let data = found.ok_or_else(|| {
        ApiError::not_found(format!(
            "no message with the id `{}` in the dead-letter queue",
            query.message_id
        ))
    })?;
    Ok(Json(Body {
        message_id: query.message_id,
        utf8: std::str::from_utf8(&data).is_ok(),
        len: data.len(),
        body: String::from_utf8_lossy(&data).into_owned(),
    }))
}

/// `GET /api/consumers/{queue}/export?text=…&…`: what the search matches,
/// as `dlq export --jsonl` writes it, as a file to save.
pub(super) async fn export(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    ApiQuery(search): ApiQuery<Search>,
) -> Result<impl IntoResponse, ApiError> {
    let filter = search.filter().map_err(ApiError::bad_request)?;
    let _one_at_a_time = console.lock(&queue).await;
    let dlq = console.dlq(&queue).await?.1;
    let mut out = Vec::new();
    let report = dlq.export(&filter, &mut out).await;
    dlq.close().await;
    let report = report.map_err(ApiError::broker)?;
    let name: String = queue
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok((
        [
            (CONTENT_TYPE, "application/x-ndjson".to_owned()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}.dlq.jsonl\""),
            ),
            (
                axum::http::HeaderName::from_static("x-exported"),
                report.exported.to_string(),
            ),
        ],
        out,
    ))
}

#[derive(Debug, Deserialize)]
pub(super) struct TierQuery {
    limit: Option<usize>,
}

/// One retry tier as the page shows it.
#[derive(Debug, Serialize)]
pub(super) struct TierView {
    queue: String,
    delay_ms: u64,
    /// Its head with due times, when it can be listed.
    listing: Option<TierListing>,
    /// Why it is not listed.
    note: Option<String>,
}

/// `GET /api/consumers/{queue}/tiers?limit=…`: the messages waiting in each
/// retry tier, with when each is due back in the work queue.
pub(super) async fn tiers(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    ApiQuery(query): ApiQuery<TierQuery>,
) -> Result<Json<Vec<TierView>>, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_LISTED).min(MAX_TIER_LISTED);
    let consumer = console.consumer(&queue).await?;
    let quorum = consumer.spec.queue_type == QueueType::Quorum;
    let connection = console.reader().await?;
    let mut views = Vec::new();
    for tier in &consumer.tiers {
        let (listing, note) = if quorum {
            (
                None,
                Some(
                    "not listed: reading a quorum queue's messages counts toward its delivery limit"
                        .to_owned(),
                ),
            )
        } else {
            let listing = rabbit_backoff::list_retry_tier(
                &*connection,
                &tier.depth.name,
                tier.delay_ms,
                limit,
            )
            .await;
            match listing {
                Ok(listing) => (Some(listing), None),
                Err(e) => {
                    console.forget_reader().await;
                    return Err(ApiError::broker(e));
                }
            }
        };
        views.push(TierView {
            queue: tier.depth.name.clone(),
            delay_ms: tier.delay_ms,
            listing,
            note,
        });
    }
    Ok(Json(views))
}

fn to_value(value: &impl Serialize) -> Result<Arc<serde_json::Value>, ApiError> {
    serde_json::to_value(value)
        .map(Arc::new)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}
