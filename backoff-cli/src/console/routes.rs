//! The JSON API and the page's files. Reads are GETs and change nothing;
//! replay, discard, edit, purge and the index's rebuild are POSTs, which the guard lets through only
//! with a token, from the console's own page. Every write is audited.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router, middleware};
use rabbit_backoff::transport::Connection;
use rabbit_backoff::{
    DeadLetterFilter, DeadLetterGroup, DeadLetterMessage, DeadLetterReport, Dlq, GroupSource,
    GroupTally, MessageEdit, QueueType, ReplayOptions, TierListing,
};
use serde::{Deserialize, Serialize};

use super::api_error::ApiError;
use super::assets;
use super::audit::{AuditEntry, AuditLog, IDS_LISTED};
use super::depths;
use super::guard::{self, Access, Guard, Operator};
use super::queue_writes;
use super::security_headers;
use super::selection::{Search, Selection};
use super::single_flight::SingleFlight;
use super::timeline::{Chart, Timeline};
use crate::discovery::{self, DiscoveredConsumer};
use crate::sourced_groups;

/// The most messages one listing returns.
const MAX_LISTED: usize = 500;
/// How many messages a listing returns unless asked.
const DEFAULT_LISTED: usize = 50;
/// The most messages listed per retry tier.
const MAX_TIER_LISTED: usize = 200;

/// A read of a dead-letter queue through its [`Dlq`], for
/// [`Console::shared_read`].
type DeadLetterRead<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<Arc<serde_json::Value>, ApiError>> + Send + 'a>>;

/// A read's result, shared by the reads of the same thing in flight.
type Shared = Result<Arc<serde_json::Value>, ApiError>;

/// What the handlers need: where the broker and its management API are.
pub struct Console {
    /// The AMQP address.
    pub amqp_url: String,
    /// The management API's address.
    pub management_url: String,
    /// Whether writes are allowed.
    pub access: Access,
    /// Where writes are recorded.
    pub audit: Option<AuditLog>,
    /// One lock per dead-letter queue, held through every pass over it. A
    /// pass holds the messages it has read until it ends, so a replay beside
    /// a read of the same queue would miss them: passes over one queue run
    /// one at a time (over different queues, side by side).
    pub locks: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Reads in flight, shared by equal reads.
    pub reads: SingleFlight<String, Shared>,
    /// A connection for depths and retry tiers, opened once.
    pub reader: tokio::sync::Mutex<Option<Arc<dyn Connection>>>,
    /// Passes of the dead-letters view so far.
    pub passes: std::sync::atomic::AtomicU64,
    /// The queues' last exact depths.
    pub remembered: depths::Remembered,
}

impl Console {
    /// A console over this broker.
    pub fn new(
        amqp_url: String,
        management_url: String,
        access: Access,
        audit: Option<AuditLog>,
    ) -> Console {
        Console {
            amqp_url,
            management_url,
            access,
            audit,
            locks: std::sync::Mutex::new(HashMap::new()),
            reads: SingleFlight::default(),
            reader: tokio::sync::Mutex::new(None),
            passes: std::sync::atomic::AtomicU64::new(0),
            remembered: depths::Remembered::default(),
        }
    }
}

/// The whole application: pages, API, guard and security headers.
pub fn router(console: Arc<Console>, guard: Arc<Guard>) -> Router {
    Router::new()
        .route("/", get(assets::page))
        .route("/console.js", get(assets::script))
        .route("/console.css", get(assets::style))
        .route("/api/config", get(config))
        .route("/api/audit", get(audit))
        .route("/api/consumers", get(consumers))
        .route("/api/consumers/{queue}/groups", get(groups))
        .route("/api/consumers/{queue}/messages", get(messages))
        .route("/api/consumers/{queue}/dead-letters", get(dead_letters))
        .route("/api/consumers/{queue}/body", get(body))
        .route("/api/consumers/{queue}/export", get(export))
        .route("/api/consumers/{queue}/tiers", get(tiers))
        .route("/api/consumers/{queue}/replay", post(replay))
        .route("/api/consumers/{queue}/discard", post(discard))
        .route("/api/consumers/{queue}/edit", post(edit))
        .route("/api/consumers/{queue}/purge", post(queue_writes::purge))
        .route(
            "/api/consumers/{queue}/rebuild-index",
            post(queue_writes::rebuild_index),
        )
        .with_state(console)
        .layer(middleware::from_fn_with_state(guard, guard::enforce))
        .layer(middleware::map_response(security_headers::add))
}

/// What the page needs to know about the console itself.
#[derive(Serialize)]
struct Config {
    read_only: bool,
    /// Where writes are recorded.
    audit_log: Option<String>,
}

/// `GET /api/config`.
async fn config(State(console): State<Arc<Console>>) -> Json<Config> {
    Json(Config {
        read_only: console.access == Access::ReadOnly,
        audit_log: console
            .audit
            .as_ref()
            .map(|a| a.path().display().to_string()),
    })
}

#[derive(Debug, Deserialize)]
struct AuditQuery {
    limit: Option<usize>,
}

/// `GET /api/audit?limit=…`: the newest writes, newest first.
async fn audit(
    State(console): State<Arc<Console>>,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
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
async fn consumers(
    State(console): State<Arc<Console>>,
) -> Result<Json<Vec<DiscoveredConsumer>>, ApiError> {
    let mut consumers = console.discover().await?;
    for consumer in &mut consumers {
        console.refresh_depths(consumer).await?;
    }
    Ok(Json(consumers))
}

/// `GET /api/consumers/{queue}/groups`: its dead letters grouped by what went wrong.
async fn groups(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let key = format!("groups\0{queue}");
    console
        .shared_read(key, queue, |dlq| {
            Box::pin(async move {
                let report = dlq.group_report(&DeadLetterFilter::default()).await;
                to_value(&sourced_groups::sourced(&report.map_err(ApiError::broker)?))
            })
        })
        .await
}

/// The query of a message listing: one group, or one message.
#[derive(Debug, Deserialize, Serialize)]
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
) -> Result<Json<serde_json::Value>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
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
struct ViewQuery {
    #[serde(flatten)]
    search: Search,
    offset: Option<usize>,
    limit: Option<usize>,
}

/// Everything the page shows of a dead-letter queue, from one pass.
#[derive(Debug, Serialize)]
struct DeadLetterView {
    /// Which pass of this console read it: equal reads in flight share one.
    pass: u64,
    /// Messages in the queue.
    depth: usize,
    /// The groups of the messages the search (without its group) matches.
    groups: Vec<DeadLetterGroup>,
    /// Where the groups were read from: `index` or `pass`.
    groups_source: GroupSource,
    /// Why, in a few words ([`rabbit_backoff::GroupReport::reason`], or why a search is
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
async fn dead_letters(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    query: Result<Query<ViewQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
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
struct BodyQuery {
    message_id: String,
}

/// A message's whole body, to edit it.
#[derive(Debug, Serialize)]
struct Body {
    message_id: String,
    /// The body as text (invalid UTF-8 replaced).
    body: String,
    /// Whether it is valid UTF-8 (only then can it be edited as text).
    utf8: bool,
    len: usize,
}

/// `GET /api/consumers/{queue}/body?message_id=…`.
async fn body(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    query: Result<Query<BodyQuery>, QueryRejection>,
) -> Result<Json<Body>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
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
async fn export(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    query: Result<Query<Search>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Query(search) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
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
struct TierQuery {
    limit: Option<usize>,
}

/// One retry tier as the page shows it.
#[derive(Debug, Serialize)]
struct TierView {
    queue: String,
    delay_ms: u64,
    /// Its head with due times, when it can be listed.
    listing: Option<TierListing>,
    /// Why it is not listed.
    note: Option<String>,
}

/// `GET /api/consumers/{queue}/tiers?limit=…`: the messages waiting in each
/// retry tier, with when each is due back in the work queue.
async fn tiers(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    query: Result<Query<TierQuery>, QueryRejection>,
) -> Result<Json<Vec<TierView>>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
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

/// What a write answers: its report, and the consumer's depths read from
/// the broker after it.
#[derive(Debug, Serialize)]
struct WriteOutcome {
    #[serde(flatten)]
    report: DeadLetterReport,
    /// Who did it.
    by: String,
    /// The consumer with its depths as they are after the write.
    consumer: DiscoveredConsumer,
}

/// `POST /api/consumers/{queue}/replay` with a [`Selection`]: back to the
/// work queue each message failed in, each confirmed before it leaves.
async fn replay(
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
async fn discard(
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
struct EditRequest {
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
async fn edit(
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
enum Write {
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

fn to_value(value: &impl Serialize) -> Result<Arc<serde_json::Value>, ApiError> {
    serde_json::to_value(value)
        .map(Arc::new)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

impl Console {
    /// A read of `queue`'s dead letters that the equal reads in flight
    /// (those of `key`) share: one at a time on the queue, on a connection
    /// of its own, closed after; its result as the response.
    async fn shared_read<R>(
        self: &Arc<Self>,
        key: String,
        queue: String,
        read: R,
    ) -> Result<Json<serde_json::Value>, ApiError>
    where
        R: for<'a> FnOnce(&'a Dlq) -> DeadLetterRead<'a> + Send,
    {
        let console = Arc::clone(self);
        let shared = self
            .reads
            .run(key, || async move {
                let _one_at_a_time = console.lock(&queue).await;
                let dlq = console.dlq(&queue).await?.1;
                let read = read(&dlq).await;
                dlq.close().await;
                read
            })
            .await?;
        Ok(Json((*shared).clone()))
    }

    async fn discover(&self) -> Result<Vec<DiscoveredConsumer>, ApiError> {
        discovery::discover_async(&self.amqp_url, &self.management_url)
            .await
            .map_err(ApiError::broker)
    }

    /// The consumer whose work queue is `queue`.
    async fn consumer(&self, queue: &str) -> Result<DiscoveredConsumer, ApiError> {
        self.discover()
            .await?
            .into_iter()
            .find(|c| c.queue == queue)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "no consumer with the work queue `{queue}` was found"
                ))
            })
    }

    /// The consumer whose work queue is `queue`, and its dead-letter queue.
    pub(super) async fn dlq(&self, queue: &str) -> Result<(DiscoveredConsumer, Dlq), ApiError> {
        let consumer = self.consumer(queue).await?;
        let dlq = Dlq::connect(&self.amqp_url, &consumer.spec)
            .await
            .map_err(ApiError::broker)?;
        Ok((consumer, dlq))
    }

    /// Held while a pass runs over the dead-letter queue of `queue`.
    pub(super) async fn lock(&self, queue: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(locks.entry(queue.to_owned()).or_default())
        };
        lock.lock_owned().await
    }

    /// The connection for depths and tiers, opened on first use.
    async fn reader(&self) -> Result<Arc<dyn Connection>, ApiError> {
        let mut reader = self.reader.lock().await;
        if let Some(connection) = &*reader {
            return Ok(Arc::clone(connection));
        }
        let connection = rabbit_backoff::connect(&self.amqp_url)
            .await
            .map_err(ApiError::broker)?;
        *reader = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// Drops the reader's connection after an error, so that the next read
    /// opens a new one.
    async fn forget_reader(&self) {
        if let Some(connection) = self.reader.lock().await.take() {
            connection.close().await;
        }
    }

    pub(super) async fn refresh_depths(
        &self,
        consumer: &mut DiscoveredConsumer,
    ) -> Result<(), ApiError> {
        let connection = self.reader().await?;
        let passing = self
            .locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&consumer.queue)
            .is_some_and(|lock| lock.try_lock().is_err());
        if let Err(e) = depths::refresh(&connection, consumer, &self.remembered, passing).await {
            self.forget_reader().await;
            return Err(ApiError::broker(e));
        }
        Ok(())
    }

    /// The name of the token a write came with; refused in read-only mode.
    pub(super) fn writer(&self, operator: Option<Extension<Operator>>) -> Result<String, ApiError> {
        // The guard refuses writes to a read-only console already; this is
        // the second lock on the same door.
        if self.access == Access::ReadOnly {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                guard::Refusal::ReadOnly.message(),
            ));
        }
        let Some(Extension(Operator(who))) = operator else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                guard::Refusal::MissingToken.message(),
            ));
        };
        Ok(who)
    }

    /// Appends `entry` to the audit log (when there is one).
    pub(super) async fn record(&self, entry: &AuditEntry) -> Result<(), ApiError> {
        if let Some(log) = &self.audit
            && let Err(e) = log.record(entry).await
        {
            // The write is done; the operator must learn that it is not on record.
            eprintln!("rabbit-backoff console: {e}");
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("done, but not recorded in the audit log: {e}"),
            ));
        }
        Ok(())
    }

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
                ReplayOptions {
                    by: Some(who.to_owned()),
                    ..ReplayOptions::default()
                },
            ),
            Write::Edit(request) => (
                DeadLetterFilter::default()
                    .message_id(request.message_id.clone())
                    .limit(1),
                ReplayOptions {
                    by: Some(who.to_owned()),
                    edit: Some(request.edit().map_err(ApiError::bad_request)?),
                    ..ReplayOptions::default()
                },
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
