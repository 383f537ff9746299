//! The metrics of one consumer, through the `metrics` facade: registered once
//! when the consumer starts, so that a message only increments handles (a
//! no-op when no recorder is installed). Names follow Prometheus' conventions.
// The benchmarks' build without the call sites leaves these unused.
#![cfg_attr(rabbit_backoff_bare, allow(unused_imports, dead_code))]

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};
use rabbit_backoff_core::{ConsumerSpec, DeadLetterReason, Fate};

use crate::telemetry::wall_clock;

/// Messages whose handler succeeded, by consumer.
pub const HANDLED: &str = "rabbit_backoff_messages_handled_total";
/// Messages retried, by consumer and tier (`delay`: the tier's delay, such
/// as `5000ms`, whatever jitter picked; `retry_after` for a wait the error
/// asked for, held exactly with `retry = "scheduled"`).
pub const RETRIED: &str = "rabbit_backoff_messages_retried_total";
/// The `delay` label of a retry that waits as long as its error asked.
pub const RETRY_AFTER_TIER: &str = "retry_after";
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
/// Replayed messages (copies a replay job sent) by consumer and `fate`:
/// `handled`, `retrying`, `dead-lettered` or `discarded`, as the consumer
/// also records them in the queue's replay log.
pub const REPLAY_FATES: &str = "rabbit_backoff_replay_fates_total";
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
///
/// Built with `--cfg rabbit_backoff_bare` (benchmarks only: see
/// PERFORMANCE.md), it records nothing and reads no clock, to measure what
/// its call sites cost when no recorder is installed.
pub(crate) struct Meters {
    #[cfg(not(rabbit_backoff_bare))]
    handles: Handles,
}

#[cfg(not(rabbit_backoff_bare))]
struct Handles {
    handled: Counter,
    retried: HashMap<u64, Counter>,
    retried_as_asked: Counter,
    dead_lettered: Vec<(DeadLetterReason, Counter)>,
    discarded: Counter,
    immediate_retries: Counter,
    handler_duration: Histogram,
    critical_time: Histogram,
    in_flight: Gauge,
    breaker_open: Gauge,
    replay_fates: Vec<(Fate, Counter)>,
}

/// When a handler call started, for its duration.
pub(crate) struct HandlerTimer {
    #[cfg(not(rabbit_backoff_bare))]
    started: tokio::time::Instant,
}

#[cfg(not(rabbit_backoff_bare))]
impl Meters {
    /// The handles of the consumer of `queue`, whose retry tiers wait `delays`.
    pub(crate) fn new(queue: &str, delays: &[u64]) -> Self {
        let consumer = queue.to_owned();
        let handles = Handles {
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
            retried_as_asked: counter!(
                RETRIED,
                "consumer" => consumer.clone(),
                "delay" => RETRY_AFTER_TIER
            ),
            dead_lettered: by_label(DEAD_LETTERED, &consumer, "reason", &REASONS, |r| r.as_str()),
            discarded: counter!(DISCARDED, "consumer" => consumer.clone()),
            immediate_retries: counter!(IMMEDIATE_RETRIES, "consumer" => consumer.clone()),
            handler_duration: histogram!(HANDLER_DURATION, "consumer" => consumer.clone()),
            critical_time: histogram!(CRITICAL_TIME, "consumer" => consumer.clone()),
            in_flight: gauge!(IN_FLIGHT, "consumer" => consumer.clone()),
            breaker_open: gauge!(BREAKER_OPEN, "consumer" => consumer.clone()),
            replay_fates: by_label(REPLAY_FATES, &consumer, "fate", &Fate::ALL, |f| f.as_str()),
        };
        Meters { handles }
    }

    /// One message handled (its handler succeeded), published at `timestamp`.
    pub(crate) fn handled(&self, timestamp: Option<u64>) {
        self.handles.handled.increment(1);
        self.settled(timestamp);
    }

    /// One message discarded on a `#[discard]` error.
    pub(crate) fn discarded(&self) {
        self.handles.discarded.increment(1);
    }

    /// One retry to the tier of `delay_ms`, or (`None`) after a wait the
    /// error asked for (`RetryAfter` with `retry = "scheduled"`).
    pub(crate) fn retried(&self, delay_ms: Option<u64>) {
        let counter = match delay_ms {
            Some(delay_ms) => self.handles.retried.get(&delay_ms),
            None => Some(&self.handles.retried_as_asked),
        };
        if let Some(counter) = counter {
            counter.increment(1);
        }
    }

    /// One dead letter for `reason`, of a message published at `timestamp`.
    pub(crate) fn dead_lettered(&self, reason: DeadLetterReason, timestamp: Option<u64>) {
        increment(&self.handles.dead_lettered, reason);
        self.settled(timestamp);
    }

    /// One handler call retried in the process.
    pub(crate) fn immediate_retry(&self) {
        self.handles.immediate_retries.increment(1);
    }

    /// A handler call starts.
    pub(crate) fn handler_started(&self) -> HandlerTimer {
        HandlerTimer {
            started: tokio::time::Instant::now(),
        }
    }

    /// The handler call `timer` was started for has ended.
    pub(crate) fn handler_ended(&self, timer: HandlerTimer) {
        self.handles
            .handler_duration
            .record(timer.started.elapsed().as_secs_f64());
    }

    /// One more (`true`) or one fewer message being handled.
    pub(crate) fn in_flight(&self, more: bool) {
        if more {
            self.handles.in_flight.increment(1.0);
        } else {
            self.handles.in_flight.decrement(1.0);
        }
    }

    /// The circuit breaker holds the consumer paused (`true`), or not.
    pub(crate) fn breaker_open(&self, open: bool) {
        self.handles.breaker_open.set(if open { 1.0 } else { 0.0 });
    }

    /// A copy sent by a replay job came to `fate`.
    pub(crate) fn replay_fate(&self, fate: Fate) {
        increment(&self.handles.replay_fates, fate);
    }

    /// The critical time of a message published at `timestamp` (seconds
    /// since the epoch, AMQP's `timestamp` property), settled now.
    fn settled(&self, timestamp: Option<u64>) {
        let Some(published) = timestamp.map(|s| UNIX_EPOCH + Duration::from_secs(s)) else {
            return;
        };
        if let Ok(age) = wall_clock::now().duration_since(published) {
            self.handles.critical_time.record(age.as_secs_f64());
        }
    }
}

/// A counter `name` of `consumer` for each of `keys`, labelled `label` with
/// the key's name.
#[cfg(not(rabbit_backoff_bare))]
fn by_label<K: Copy>(
    name: &'static str,
    consumer: &str,
    label: &'static str,
    keys: &[K],
    key_name: impl Fn(K) -> &'static str,
) -> Vec<(K, Counter)> {
    keys.iter()
        .map(|&key| {
            let labels = [
                ("consumer", consumer.to_owned()),
                (label, key_name(key).to_owned()),
            ];
            (key, counter!(name, &labels))
        })
        .collect()
}

/// Counts one for `key` in `counters` (from [`by_label`]).
#[cfg(not(rabbit_backoff_bare))]
fn increment<K: PartialEq>(counters: &[(K, Counter)], key: K) {
    if let Some((_, counter)) = counters.iter().find(|(k, _)| *k == key) {
        counter.increment(1);
    }
}

#[cfg(rabbit_backoff_bare)]
#[allow(clippy::unused_self, missing_docs)]
impl Meters {
    pub(crate) fn new(_: &str, _: &[u64]) -> Self {
        Meters {}
    }
    pub(crate) fn handled(&self, _: Option<u64>) {}
    pub(crate) fn discarded(&self) {}
    pub(crate) fn retried(&self, _: Option<u64>) {}
    pub(crate) fn dead_lettered(&self, _: DeadLetterReason, _: Option<u64>) {}
    pub(crate) fn immediate_retry(&self) {}
    pub(crate) fn handler_started(&self) -> HandlerTimer {
        HandlerTimer {}
    }
    pub(crate) fn handler_ended(&self, _: HandlerTimer) {}
    pub(crate) fn in_flight(&self, _: bool) {}
    pub(crate) fn breaker_open(&self, _: bool) {}
    pub(crate) fn replay_fate(&self, _: Fate) {}
}

impl Meters {
    /// The handles of `spec`'s consumer, a retried counter for each delay
    /// of its tiers and ladders.
    pub(crate) fn of(spec: &ConsumerSpec) -> Self {
        let delays: Vec<u64> = spec
            .delays
            .as_millis()
            .iter()
            .chain(spec.ladders.iter().flatten())
            .copied()
            .collect();
        Meters::new(&spec.queue, &delays)
    }
}

/// Counts one reconnection of the runtime.
pub(crate) fn reconnected() {
    counter!(RECONNECTS).increment(1);
}
