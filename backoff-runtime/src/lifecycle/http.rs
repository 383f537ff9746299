//! Health over HTTP for Kubernetes probes (feature `http`).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::{Health, HealthWatch};

/// Routes `GET /health/ready` (200 `Ready` when every consumer consumes,
/// 503 with the state otherwise) and `GET /health/live` (200 unless the
/// runtime stopped or failed), to merge into a service's router or serve on
/// their own.
///
/// ```no_run
/// # async fn demo(runtime: rabbit_backoff::Runtime) -> std::io::Result<()> {
/// let app = rabbit_backoff::http::health_routes(runtime.health());
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9464").await?;
/// tokio::spawn(async move { axum::serve(listener, app).await });
/// # Ok(()) }
/// ```
pub fn health_routes(health: HealthWatch) -> Router {
    Router::new()
        .route("/health/ready", get(ready))
        .route("/health/live", get(live))
        .with_state(health)
}

async fn ready(State(health): State<HealthWatch>) -> (StatusCode, String) {
    match health.current() {
        Health::Ready => (StatusCode::OK, "Ready\n".to_owned()),
        other => (StatusCode::SERVICE_UNAVAILABLE, format!("{other:?}\n")),
    }
}

async fn live(State(health): State<HealthWatch>) -> (StatusCode, String) {
    match health.current() {
        state @ (Health::Stopped | Health::Failed(_)) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{state:?}\n"))
        }
        state => (StatusCode::OK, format!("{state:?}\n")),
    }
}
