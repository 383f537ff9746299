//! The web console of [rabbit-backoff](https://docs.rs/rabbit-backoff): a
//! page for operators over the consumers found on a broker. It lists them
//! with the depth of every tier and what waits in each retry tier, groups
//! each dead-letter queue by what went wrong with a chart over time,
//! searches and pages through it, shows one message, exports what matches,
//! and replays, edits or discards one message, a selection, a group or every
//! match; purges a dead-letter queue or rebuilds its index; starts replay
//! jobs (a canary, then waves, stopped when the copies fail again), drives
//! them, and shows, pauses, resumes and stops them from their replay log.
//! Every write is recorded in an audit log.
//!
//! The console is an [`axum::Router`]: `rabbit-backoff console` serves it
//! on its own, and a service can mount it under a path of its own, beside
//! its other routes. The page and its scripts use relative addresses only,
//! so they work under any prefix.
//!
//! ```no_run
//! use rabbit_backoff_console::{Console, Tokens};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let console = Console::builder("amqp://guest:guest@127.0.0.1:5672/%2f")
//!     .management_url("http://127.0.0.1:15672")
//!     .tokens(Tokens::parse("alice:0123456789abcdef0123")?)
//!     .allowed_host("127.0.0.1:8080")
//!     .build()?;
//! let app = axum::Router::new().nest("/ops/console", console.router());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Safe by default: writes need a token ([`Tokens`]), must come from the
//! console's own page and be JSON; every request must name one of the
//! allowed hosts; reads of the API from other sites are refused; data is
//! shown as text only, under a content security policy that allows no
//! inline script. Services reach this crate through the facade's feature
//! `console` (`rabbit_backoff::console`).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod api_error;
mod api_query;
mod assets;
mod broker;
mod build_error;
mod builder;
mod console;
mod job_path;
mod queue_locks;
mod router;
mod security;
mod selection;
mod shared_json;
mod single_flight;
mod state;
mod views;
mod writes;

pub use build_error::BuildError;
pub use builder::ConsoleBuilder;
pub use console::Console;
pub use security::audit::{AuditLog, default_audit_path};
pub use security::token::{DEFAULT_OPERATOR, TOKEN_VARIABLE, TOKENS_VARIABLE, TokenSource, Tokens};
