//! The route table: the page's files, the JSON API's reads (GETs, which
//! change nothing) and writes (POSTs: replay, discard, edit, purge and the
//! index's rebuild, which the guard lets through only with a token, from the
//! console's own page; every write is audited), behind the guard and the
//! security headers.

use std::sync::Arc;

use axum::routing::{get, post};
use axum::{Router, middleware};

use super::assets;
use super::guard::{self, Guard};
use super::message_writes::{discard, edit, replay};
use super::queue_writes;
use super::reads::{audit, body, config, consumers, dead_letters, export, groups, messages, tiers};
use super::security_headers;
use super::state::Console;

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
