//! The route table: the page's files, the JSON API's reads (GETs, which
//! change nothing, one module per view) and writes (POSTs, one module per
//! action, which the guard lets through only with a token, from the
//! console's own page; every write is audited), behind the guard and the
//! security headers. Every path is relative to where the router is
//! mounted.

use std::sync::Arc;

use axum::routing::{get, post};
use axum::{Router, middleware};

use crate::assets;
use crate::security::guard::{self, Guard};
use crate::security::security_headers;
use crate::state::State;
use crate::views::{
    audit::audit, body::body, config::config, consumers::consumers, dead_letters::dead_letters,
    export::export, groups::groups, messages::messages, replay_jobs::replay_job,
    replay_jobs::replay_jobs, tiers::tiers,
};
use crate::writes::{
    discard::discard, edit::edit, job_control, purge::purge, rebuild_index::rebuild_index,
    replay::replay, replay_job::start_replay_job,
};

/// The whole application: pages, API, guard and security headers.
pub(crate) fn router(state: Arc<State>, guard: Arc<Guard>) -> Router {
    Router::new()
        .route("/", get(assets::page))
        .route("/{file}", get(assets::file))
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
        .route("/api/consumers/{queue}/purge", post(purge))
        .route("/api/consumers/{queue}/rebuild-index", post(rebuild_index))
        .route(
            "/api/consumers/{queue}/replay-jobs",
            get(replay_jobs).post(start_replay_job),
        )
        .route("/api/consumers/{queue}/replay-jobs/{id}", get(replay_job))
        .route(
            "/api/consumers/{queue}/replay-jobs/{id}/pause",
            post(job_control::pause),
        )
        .route(
            "/api/consumers/{queue}/replay-jobs/{id}/resume",
            post(job_control::resume),
        )
        .route(
            "/api/consumers/{queue}/replay-jobs/{id}/stop",
            post(job_control::stop),
        )
        .with_state(state)
        .layer(middleware::from_fn_with_state(guard, guard::enforce))
        .layer(middleware::map_response(security_headers::add))
}
