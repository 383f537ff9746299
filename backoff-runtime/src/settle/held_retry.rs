//! A retry the broker holds back (`retry = "scheduled"`): the delivery
//! settled as `modified` with the time it is to come back and the
//! annotations that say where the retry stands. No copy: the work queue
//! holds the message back.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::BasicProperties;
use rabbit_backoff_core::{annotations, truncate_error};

use crate::settle::executor::{Executor, Original};
use crate::settle::first_failure::first_failed_at;
use crate::telemetry::wall_clock::{self, Stamp};
use crate::transport::{Acker, AnnotationValue, Modification};

/// `time` in milliseconds since the Unix epoch (AMQP 1.0's timestamp),
/// rounded up: the broker delivers a held message at that millisecond, so a
/// retry never comes back before its delay has passed.
fn unix_ms_not_before(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| {
        let whole = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
        i64::try_from(whole).unwrap_or(i64::MAX)
    })
}

impl Executor {
    /// `retry = "scheduled"`: settles a transient failure as `modified`, to
    /// be delivered again `delay_ms` (with jitter) from now, with the retry
    /// count, the error and the first failure as annotations. No copy: the
    /// work queue holds the message back. True when settled.
    pub(super) async fn hold(
        &self,
        acker: &Acker,
        original: &Original<'_>,
        (delay_ms, exact): (u64, bool),
        next_count: u32,
    ) -> bool {
        let wait = match exact {
            true => Wait::Asked(delay_ms),
            false => Wait::Tier(delay_ms),
        };
        let ms = match wait {
            Wait::Tier(delay_ms) => self.spec.jittered(delay_ms, fastrand::f64()),
            // What the error asked for, never less.
            Wait::Asked(delay_ms) => delay_ms,
        };
        let now = wall_clock::now();
        let at = now + Duration::from_millis(ms);
        let modification = Modification::failed()
            .annotate(
                annotations::DELIVERY_TIME,
                AnnotationValue::Timestamp(unix_ms_not_before(at)),
            )
            .annotate(annotations::RETRY_COUNT, AnnotationValue::Uint(next_count))
            .annotate(
                annotations::ERROR,
                AnnotationValue::String(truncate_error(original.error)),
            )
            .annotate(
                annotations::FIRST_FAILED_AT,
                AnnotationValue::String(self.first_failure(original.properties, now)),
            );
        if let Err(e) = self.acks.modify(acker, modification).await {
            tracing::warn!(
                error = original.error,
                "not held back ({e}); the broker will deliver the message again"
            );
            return false;
        }
        // Counted under its tier (or as asked), whatever the jitter picked.
        self.retried(
            original.error,
            wait.counted(),
            next_count,
            format_args!("{ms}ms, held back by {}", self.topology.work_queue.name),
        );
        true
    }

    /// When the message first failed, as its annotation says, or `now` at
    /// its first failure.
    fn first_failure(&self, properties: &BasicProperties, now: SystemTime) -> String {
        match first_failed_at(properties, &self.tiers).and_then(|first| first.time()) {
            Some(first) => Stamp::of(first).to_string(),
            None => Stamp::of(now).to_string(),
        }
    }
}

/// How long a held retry waits.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// A tier's delay, jittered when the consumer has jitter.
    Tier(u64),
    /// Exactly what the error asked for (`RetryAfter`).
    Asked(u64),
}

impl Wait {
    /// The tier the retried counter counts it under: none for a wait the
    /// error asked for.
    fn counted(self) -> Option<u64> {
        match self {
            Wait::Tier(delay_ms) => Some(delay_ms),
            Wait::Asked(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_time_is_never_before_the_delay() {
        let at = |nanos| UNIX_EPOCH + Duration::from_nanos(nanos);
        assert_eq!(
            unix_ms_not_before(at(1_700_000_000_000_000_000)),
            1_700_000_000_000
        );
        assert_eq!(
            unix_ms_not_before(at(1_700_000_000_000_000_001)),
            1_700_000_000_001
        );
        assert_eq!(
            unix_ms_not_before(at(1_700_000_000_000_999_999)),
            1_700_000_000_001
        );
        assert_eq!(unix_ms_not_before(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
