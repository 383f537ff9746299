//! A configured console, and the router that serves it.

use std::sync::Arc;

use axum::Router;

use crate::router;
use crate::security::guard::Guard;
use crate::state::State;

/// The web console over one broker, built by [`Console::builder`]; its
/// [`router`](Console::router) serves the page and its JSON API.
///
/// ```no_run
/// use rabbit_backoff_console::{Console, Tokens};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let console = Console::builder("amqp://guest:guest@127.0.0.1:5672/%2f")
///     .tokens(Tokens::from_env_or_random()?)
///     .allowed_host("127.0.0.1:3000")
///     .build()?;
/// // The service's own routes, and the console under a path of its own:
/// // the page is at http://127.0.0.1:3000/ops/console/.
/// let app = axum::Router::new()
///     .route("/healthz", axum::routing::get(|| async { "ok" }))
///     .nest("/ops/console", console.router());
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, app).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Console {
    pub(crate) state: Arc<State>,
    pub(crate) guard: Arc<Guard>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("amqp_url", &self.state.amqp_url)
            .field("management_url", &self.state.management_url)
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl Console {
    /// The page (at `/`, which sends `<prefix>` on to `<prefix>/`), its
    /// scripts and style, and the JSON API (under `api/`), behind the guard
    /// and the security headers. Serve it, or `nest` it under a path of the
    /// service's own: every address the page uses is relative to it.
    /// Routers from one console share its state (locks, reads in flight,
    /// the reader connection).
    pub fn router(&self) -> Router {
        router::router(Arc::clone(&self.state), Arc::clone(&self.guard))
    }
}
