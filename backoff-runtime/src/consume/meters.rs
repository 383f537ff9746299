//! The metrics of one consumer, through the `metrics` facade: registered once
//! when the consumer starts, so that a message only increments handles (a
//! no-op when no recorder is installed). Names follow Prometheus' conventions.

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};
use rabbit_backoff_core::DeadLetterReason;

/// Messages whose handler succeeded, by consumer.
pub const HANDLED: &str = "rabbit_backoff_messages_handled_total";
/// Messages republished to a retry tier, by consumer and tier (`delay`).
pub const RETRIED: &str = "rabbit_backoff_messages_retried_total";
/// Messages dead-lettered, by consumer and `reason`.
pub const DEAD_LETTERED: &str = "rabbit_backoff_messages_dead_lettered_total";
/// Messages acked and dropped on a `#[discard]` error, by consumer.
pub const DISCARDED: &str = "rabbit_backoff_messages_discarded_total";
/// Handler calls retried in the process (`immediate`), by consumer.
pub const IMMEDIATE_RETRIES: &str = "rabbit_backoff_immediate_retries_total";
/// How long each handler call took, in seconds, by consumer.
pub const HANDLER_DURATION: &str = "rabbit_backoff_handler_duration_seconds";
/// From the message's `timestamp` property to the end of its handling, in
/// seconds (critical time), by consumer.
pub const CRITICAL_TIME: &str = "rabbit_backoff_critical_time_seconds";
/// Messages being handled now, by consumer.
pub const IN_FLIGHT: &str = "rabbit_backoff_messages_in_flight";
/// 1 while the consumer's circuit breaker holds it paused, else 0.
pub const BREAKER_OPEN: &str = "rabbit_backoff_breaker_open";
/// Deliveries acked without running the handler: their key completed
/// within the dedupe window, by consumer.
pub const DUPLICATES_SKIPPED: &str = "rabbit_backoff_duplicates_skipped_total";
/// Deliveries of a consumer with dedupe that had no key (no `message_id`,
/// or no such header), handled without the inbox, by consumer.
pub const WITHOUT_KEY: &str = "rabbit_backoff_dedupe_without_key_total";
/// Reconnections of the runtime.
pub const RECONNECTS: &str = "rabbit_backoff_reconnects_total";

const REASONS: [DeadLetterReason; 5] = [
    DeadLetterReason::Permanent,
    DeadLetterReason::Exhausted,
    DeadLetterReason::Decode,
    DeadLetterReason::Oversized,
    DeadLetterReason::Expired,
];

/// One consumer's metric handles.
pub(crate) struct Meters {
    pub(crate) handled: Counter,
    retried: HashMap<u64, Counter>,
    dead_lettered: Vec<(DeadLetterReason, Counter)>,
    pub(crate) discarded: Counter,
    pub(crate) immediate_retries: Counter,
    pub(crate) handler_duration: Histogram,
    critical_time: Histogram,
    pub(crate) in_flight: Gauge,
    pub(crate) breaker_open: Gauge,
}

impl Meters {
    /// The handles of the consumer of `queue`, whose retry tiers wait `delays`.
    pub(crate) fn new(queue: &str, delays: &[u64]) -> Self {
        let consumer = queue.to_owned();
        Meters {
            handled: counter!(HANDLED, "consumer" => consumer.clone()),
            retried: delays
                .iter()
                .map(|&ms| {
                    let tier = format!("{ms}ms");
                    (
                        ms,
                        counter!(RETRIED, "consumer" => consumer.clone(), "delay" => tier),
                    )
                })
                .collect(),
            dead_lettered: REASONS
                .iter()
                .map(|&reason| {
                    let labels = [
                        ("consumer", consumer.clone()),
                        ("reason", reason.as_str().to_owned()),
                    ];
                    (reason, counter!(DEAD_LETTERED, &labels))
                })
                .collect(),
            discarded: counter!(DISCARDED, "consumer" => consumer.clone()),
            immediate_retries: counter!(IMMEDIATE_RETRIES, "consumer" => consumer.clone()),
            handler_duration: histogram!(HANDLER_DURATION, "consumer" => consumer.clone()),
            critical_time: histogram!(CRITICAL_TIME, "consumer" => consumer.clone()),
            in_flight: gauge!(IN_FLIGHT, "consumer" => consumer.clone()),
            breaker_open: gauge!(BREAKER_OPEN, "consumer" => consumer),
        }
    }

    /// One retry to the tier of `delay_ms`.
    pub(crate) fn retried(&self, delay_ms: u64) {
        if let Some(counter) = self.retried.get(&delay_ms) {
            counter.increment(1);
        }
    }

    /// One dead letter for `reason`.
    pub(crate) fn dead_lettered(&self, reason: DeadLetterReason) {
        if let Some((_, counter)) = self.dead_lettered.iter().find(|(r, _)| *r == reason) {
            counter.increment(1);
        }
    }

    /// The critical time of a message published at `timestamp` (seconds
    /// since the epoch, AMQP's `timestamp` property), handled now.
    pub(crate) fn settled(&self, timestamp: Option<u64>) {
        let Some(published) = timestamp.map(|s| UNIX_EPOCH + Duration::from_secs(s)) else {
            return;
        };
        if let Ok(age) = crate::settle::clock::now().duration_since(published) {
            self.critical_time.record(age.as_secs_f64());
        }
    }
}

/// Counts one reconnection of the runtime.
pub(crate) fn reconnected() {
    counter!(RECONNECTS).increment(1);
}
