//! The framework's clock: the system's, moved by however far tokio's clock
//! stands from real time. In production it is `SystemTime::now()`; under
//! paused tokio time (`#[tokio::test(start_paused = true)]`) it is virtual,
//! and still while virtual time stands still.
//!
//! It stamps what the framework writes (`x-failed-at`, `x-replayed-at`,
//! `x-opt-delivery-time`) and measures what it reads (`max_age`), so that
//! whoever writes or reads those beside the runtime (the dead-letter
//! operations, the in-memory broker of `rabbit_backoff::testing`) keeps the
//! same time as the consumers do.

use std::time::SystemTime;

/// Now on the framework's clock. What the in-memory broker reads an
/// `x-opt-delivery-time` against.
///
/// ```
/// let before = std::time::SystemTime::now();
/// let now = rabbit_backoff_runtime::clock::now();
/// assert!(now.duration_since(before).unwrap_or_default() < std::time::Duration::from_secs(60));
/// ```
pub fn now() -> SystemTime {
    crate::telemetry::wall_clock::now()
}

/// Now on the framework's clock, RFC 3339 in UTC with milliseconds
/// (`2026-01-01T00:00:00.000Z`): what `x-failed-at` and `x-replayed-at`
/// hold.
///
/// ```
/// let stamp = rabbit_backoff_runtime::clock::now_rfc3339();
/// assert!(stamp.ends_with('Z') && stamp.len() == 24, "{stamp}");
/// ```
pub fn now_rfc3339() -> String {
    crate::settle::copy_properties::now_rfc3339().to_string()
}
