//! The log line of each failure, sampled: every failure of a consumer is
//! logged at `WARN` until [`BURST`] of them in a [`WINDOW`], then the rest of
//! the window at `DEBUG`, with one `WARN` line that counts them when the
//! window ends. A flood of failures costs a few lines a second, not one
//! line per message; a failure now and then is logged in full as before.
//!
//! Only log events are sampled. Each failure's span records its outcome and
//! error (`otel.status_code`, `otel.status_description`, see
//! [`record_failure`]), the metrics count every one, and each dead letter
//! carries its error in `x-error`: a sampled line loses nothing they say.
//! The same scheme as zap's sampler in Go: the first few each second, then
//! a count.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How many failures of one consumer are logged one by one at `WARN` in a
/// [`WINDOW`].
pub(crate) const BURST: u32 = 10;

/// The window over which [`BURST`] failures are logged one by one.
pub(crate) const WINDOW: Duration = Duration::from_secs(1);

/// Where a failed delivery went, for the window's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureFate {
    /// Retried: a copy to a tier, or held back by the work queue.
    Retried,
    /// Dead-lettered, for any reason.
    DeadLettered,
}

/// Whether a failure's line is written at `WARN` or, past the window's
/// burst, at `DEBUG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineLevel {
    Warn,
    Debug,
}

/// One consumer's sampler (cheap to clone: the clones share it).
#[derive(Clone)]
pub(crate) struct FailureLog {
    queue: Arc<str>,
    window: Arc<Mutex<Window>>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    logged: u32,
    retried: u64,
    dead_lettered: u64,
    /// A task will write the count when the window ends.
    count_due: bool,
}

impl FailureLog {
    /// The sampler of the consumer of `queue`.
    pub(crate) fn new(queue: &str) -> Self {
        FailureLog {
            queue: Arc::from(queue),
            window: Arc::new(Mutex::new(Window {
                started: Instant::now(),
                logged: 0,
                retried: 0,
                dead_lettered: 0,
                count_due: false,
            })),
        }
    }

    /// The level of the line of one failure that went `fate`. Past the
    /// burst, the failure is counted, and the window's count is written at
    /// `WARN` when it ends (by a task spawned once per window).
    pub(crate) fn level(&self, fate: FailureFate) -> LineLevel {
        let now = Instant::now();
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        if !window.count_due && now.duration_since(window.started) >= WINDOW {
            window.started = now;
            window.logged = 0;
        }
        if window.logged < BURST {
            window.logged += 1;
            return LineLevel::Warn;
        }
        match fate {
            FailureFate::Retried => window.retried += 1,
            FailureFate::DeadLettered => window.dead_lettered += 1,
        }
        if !window.count_due {
            window.count_due = true;
            let ends = window.started + WINDOW;
            let log = self.clone();
            drop(window);
            tokio::spawn(async move {
                tokio::time::sleep_until(ends).await;
                log.write_count();
            });
        }
        LineLevel::Debug
    }

    /// Writes the count of the window that ended, and starts the next.
    fn write_count(&self) {
        let (retried, dead_lettered) = {
            let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
            let counted = (window.retried, window.dead_lettered);
            *window = Window {
                started: Instant::now(),
                logged: 0,
                retried: 0,
                dead_lettered: 0,
                count_due: false,
            };
            counted
        };
        tracing::warn!(
            queue = &*self.queue,
            retried,
            dead_lettered,
            "{} more failures of {} in the last {} s ({retried} retried, {dead_lettered} \
             dead-lettered), logged at DEBUG only: past {BURST} a second, failures are counted \
             here; each is in the metrics, in its span and, dead-lettered, in its x-error",
            retried + dead_lettered,
            self.queue,
            WINDOW.as_secs(),
        );
    }
}

/// Writes one failure's line at `level` ([`FailureLog::level`]): the
/// arguments of `tracing::warn!`.
macro_rules! failure_line {
    ($level:expr, $($arg:tt)+) => {
        match $level {
            $crate::telemetry::failure_log::LineLevel::Warn => tracing::warn!($($arg)+),
            $crate::telemetry::failure_log::LineLevel::Debug => tracing::debug!($($arg)+),
        }
    };
}
pub(crate) use failure_line;

/// Records on the current span (the delivery's) that its attempt failed,
/// with `error`, as OpenTelemetry's span status: what the span says does not
/// depend on which log lines were sampled.
pub(crate) fn record_failure(error: &str) {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", error);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn past_the_burst_failures_are_counted_until_the_window_ends() {
        let log = FailureLog::new("orders");
        for _ in 0..BURST {
            assert_eq!(log.level(FailureFate::DeadLettered), LineLevel::Warn);
        }
        assert_eq!(log.level(FailureFate::DeadLettered), LineLevel::Debug);
        assert_eq!(log.level(FailureFate::Retried), LineLevel::Debug);
        {
            let window = log.window.lock().unwrap();
            assert_eq!((window.retried, window.dead_lettered), (1, 1));
            assert!(window.count_due);
        }
        // The window ends: its count is written, and the next one logs again.
        tokio::time::sleep(WINDOW + Duration::from_millis(1)).await;
        tokio::task::yield_now().await;
        {
            let window = log.window.lock().unwrap();
            assert_eq!(
                (window.retried, window.dead_lettered, window.logged),
                (0, 0, 0)
            );
            assert!(!window.count_due);
        }
        assert_eq!(log.level(FailureFate::Retried), LineLevel::Warn);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_now_and_then_is_always_logged_in_full() {
        let log = FailureLog::new("orders");
        for _ in 0..(3 * BURST) {
            assert_eq!(log.level(FailureFate::Retried), LineLevel::Warn);
            tokio::time::sleep(WINDOW / 5).await;
        }
    }
}
