//! What the tests of rabbit-backoff's crates share, in one place: the test
//! broker ([`broker`]), the TLS node of `scripts/tls.sh` ([`tls`]), headers
//! nested deeper than lapin can hold ([`deep_headers`]), requests written by
//! hand to a server on the loopback address ([`http`]), and for the web
//! console's tests a consumer with dead letters ([`dead_letter_fixture`])
//! and, with the feature `browser`, a headless Chromium (the module `browser`);
//! queues and exchanges declared, and messages published, with plain lapin
//! calls ([`declare`], [`publish`]) and,
//! with the feature `amqp1`, AMQP 1.0 connections (the module
//! `amqp1`).
//!
//! Not published: only the workspace's own tests depend on it, as a
//! dev-dependency. What users' tests get is `rabbit-backoff-testing`, the
//! in-memory broker.

use std::time::Duration;

#[cfg(feature = "amqp1")]
pub mod amqp1;
pub mod broker;
#[cfg(feature = "browser")]
pub mod browser;
pub mod cleanup;
pub mod dead_letter_fixture;
pub mod declare;
pub mod deep_headers;
pub mod http;
pub mod log_capture;
pub mod publish;
pub mod tls;

/// How long a test waits for what the broker and the console's page do by
/// themselves: queue depths reach the page through the management API,
/// whose statistics lag by up to 5 s.
pub const PATIENCE: Duration = Duration::from_secs(30);
