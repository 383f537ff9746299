//! The framework's wall clock: the system's, moved forward by however far
//! tokio's clock has been advanced past real time. In production the two
//! clocks agree and this is `SystemTime::now()`; under
//! `#[tokio::test(start_paused = true)]` the timestamps the framework writes
//! (`x-failed-at`, `x-first-failed-at`) and the ages it reads (`max_age`)
//! follow virtual time, so a one-hour deadline plays out in milliseconds.

use std::time::SystemTime;

/// Now, on the framework's clock.
pub(crate) fn now() -> SystemTime {
    let virtual_now = tokio::time::Instant::now().into_std();
    let skew = virtual_now.saturating_duration_since(std::time::Instant::now());
    SystemTime::now() + skew
}
