//! When a message first failed, as its headers say it: `x-first-failed-at`,
//! a first retry copy's `x-retried-at`, or, on a first retry copy that
//! carries neither, the broker's record of its expiry from its tier.
//!
//! A first retry copy carries only `x-retry-count` unless its consumer has
//! a `max_age` (every header of a copy costs the broker on every hop on
//! RabbitMQ 4.x: PERFORMANCE.md). It entered its tier at its first failure,
//! and left it that tier's delay later, which the broker writes in the
//! newest `x-death` entry: its `time`, in whole seconds, less the delay of
//! the queue it names is the first failure, up to a second early.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::BasicProperties;
use lapin::types::{AMQPValue, ShortString};
use rabbit_backoff_core::{
    HeaderValue, Topology, annotations, headers, parse_failed_at, read_retry_count,
};

use crate::telemetry::wall_clock::{self, Stamp};
use crate::transport::amqp_values::header_view;

/// The broker's header recording each dead-lettering of a message.
use rabbit_backoff_core::headers::DEATH as X_DEATH;

/// Each of a consumer's retry queues with its delay: where a retry of a
/// delay goes, and what a first retry copy's `x-death` is read against.
#[derive(Debug, Clone, Default)]
pub(crate) struct TierDelays(Vec<(String, u64)>);

/// How long ago the message first failed, from `x-first-failed-at` (or on a
/// first retry copy, which carries none, see [`first_failed_at`]); `tiers`
/// are the consumer's retry queues.
pub(crate) fn since_first_failure(
    properties: &BasicProperties,
    tiers: &TierDelays,
) -> Option<Duration> {
    let first = first_failed_at(properties, tiers)?.time()?;
    Some(wall_clock::now().duration_since(first).unwrap_or_default())
}

impl TierDelays {
    /// The retry queues of `topology`, whose delays are `delays` (in the
    /// same order, [`ConsumerSpec::retry_delays`](rabbit_backoff_core::ConsumerSpec::retry_delays)).
    pub(crate) fn of(topology: &Topology, delays: &[u64]) -> Self {
        let queues = topology.retry_queues.iter().map(|q| q.name.clone());
        TierDelays(queues.zip(delays.iter().copied()).collect())
    }

    /// The retry queue whose delay is `delay_ms`; the first tier's when
    /// none is (every delay a decision can return has a declared queue).
    pub(crate) fn queue_of(&self, delay_ms: u64) -> &str {
        let (queue, _) = self
            .0
            .iter()
            .find(|(_, delay)| *delay == delay_ms)
            .unwrap_or(&self.0[0]);
        queue
    }

    fn delay_of(&self, queue: &[u8]) -> Option<u64> {
        let (_, delay) = self.0.iter().find(|(name, _)| name.as_bytes() == queue)?;
        Some(*delay)
    }
}

/// When a message first failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FirstFailure<'a> {
    /// As written: `x-first-failed-at`, or a first retry copy's
    /// `x-retried-at`.
    Written(HeaderValue<'a>),
    /// From a first retry copy's expiry from its tier.
    Derived(SystemTime),
}

impl FirstFailure<'_> {
    /// The time, when it reads as one.
    pub(crate) fn time(&self) -> Option<SystemTime> {
        match self {
            FirstFailure::Written(HeaderValue::Str(text)) => parse_failed_at(text),
            FirstFailure::Written(_) => None,
            FirstFailure::Derived(at) => Some(*at),
        }
    }

    /// The time as the header value a copy carries: as written, or
    /// RFC 3339 with milliseconds.
    pub(crate) fn with_value<R>(&self, f: impl FnOnce(HeaderValue<'_>) -> R) -> R {
        match self {
            FirstFailure::Written(value) => f(value.clone()),
            FirstFailure::Derived(at) => f(HeaderValue::Str(&Stamp::of(*at))),
        }
    }

    /// The time as text: as written (when it is text), or RFC 3339 with
    /// milliseconds.
    pub(crate) fn to_text(&self) -> Option<String> {
        self.with_value(|value| match value {
            HeaderValue::Str(text) => Some(text.to_owned()),
            _ => None,
        })
    }
}

/// When the message of `properties` first failed: its `x-first-failed-at`
/// (or the annotation `x-opt-first-failed-at` of a retry held back by the
/// broker),
/// or on a first retry copy (which carries none) what
/// [`implied_first_failure`] reads. `None` before any failure, or when
/// nothing says it.
pub(crate) fn first_failed_at<'a>(
    properties: &'a BasicProperties,
    tiers: &TierDelays,
) -> Option<FirstFailure<'a>> {
    let table = properties.headers().as_ref()?.inner();
    // A retry held back by the broker carries it as an annotation.
    let written = table
        .get(headers::FIRST_FAILED_AT)
        .or_else(|| table.get(annotations::FIRST_FAILED_AT));
    match written {
        Some(first) => Some(FirstFailure::Written(header_view(first))),
        None => first_copy_failure(table, tiers),
    }
}

/// When a retry copy without `x-first-failed-at` (a first one) first
/// failed, see [`first_copy_failure`]. `None` for a message that carries
/// `x-first-failed-at` itself.
pub(crate) fn implied_first_failure<'a>(
    properties: &'a BasicProperties,
    tiers: &TierDelays,
) -> Option<FirstFailure<'a>> {
    let table = properties.headers().as_ref()?.inner();
    if table.contains_key(headers::FIRST_FAILED_AT) {
        return None;
    }
    first_copy_failure(table, tiers)
}

/// When the retry copy of `table`, which carries no `x-first-failed-at`,
/// first failed: its `x-retried-at` when it carries one, else its expiry
/// from its tier. `None` without a retry count.
fn first_copy_failure<'a>(
    table: &'a BTreeMap<ShortString, AMQPValue>,
    tiers: &TierDelays,
) -> Option<FirstFailure<'a>> {
    let count = table.get(headers::RETRY_COUNT).map(header_view);
    if read_retry_count(count.as_ref()).count == 0 {
        return None;
    }
    if let Some(entered) = table.get(headers::RETRIED_AT) {
        return Some(FirstFailure::Written(header_view(entered)));
    }
    expired_from_tier(table, tiers).map(FirstFailure::Derived)
}

/// When the copy of `table` entered the tier it has just left: the newest
/// `x-death` entry's `time` less its queue's delay, when that entry says it
/// expired once from one of `tiers`. A count above 1 means an entry of an
/// earlier life (RabbitMQ 3.x keeps the time of the first dead-lettering
/// per queue and reason), whose time says nothing of this one.
fn expired_from_tier(
    table: &BTreeMap<ShortString, AMQPValue>,
    tiers: &TierDelays,
) -> Option<SystemTime> {
    let Some(AMQPValue::FieldArray(deaths)) = table.get(X_DEATH) else {
        return None;
    };
    let Some(AMQPValue::FieldTable(newest)) = deaths.as_slice().first() else {
        return None;
    };
    let newest = newest.inner();
    let text = |name: &str| match newest.get(name)? {
        AMQPValue::LongString(s) => Some(s.as_bytes()),
        AMQPValue::ShortString(s) => Some(s.as_str().as_bytes()),
        _ => None,
    };
    if text("reason")? != b"expired" {
        return None;
    }
    let count = newest.get("count").map(header_view);
    if count != Some(HeaderValue::Int(1)) {
        return None;
    }
    let delay = tiers.delay_of(text("queue")?)?;
    let Some(AMQPValue::Timestamp(left)) = newest.get("time") else {
        return None;
    };
    (UNIX_EPOCH + Duration::from_secs(*left)).checked_sub(Duration::from_millis(delay))
}

#[cfg(test)]
mod tests {
    use lapin::types::FieldTable;

    use super::*;

    fn tiers() -> TierDelays {
        TierDelays(vec![
            ("orders.retry_5000ms".into(), 5_000),
            ("orders.retry_60000ms".into(), 60_000),
        ])
    }

    fn death(queue: &str, reason: &str, count: i64, time: u64) -> AMQPValue {
        let mut entry = FieldTable::default();
        entry.insert("count".into(), AMQPValue::LongLongInt(count));
        entry.insert("reason".into(), AMQPValue::LongString(reason.into()));
        entry.insert("queue".into(), AMQPValue::LongString(queue.into()));
        entry.insert("time".into(), AMQPValue::Timestamp(time));
        AMQPValue::FieldTable(entry)
    }

    fn copy(retry_count: i64, deaths: Vec<AMQPValue>, more: &[(&str, &str)]) -> BasicProperties {
        let mut table = FieldTable::default();
        table.insert(
            headers::RETRY_COUNT.into(),
            AMQPValue::LongLongInt(retry_count),
        );
        if !deaths.is_empty() {
            table.insert(X_DEATH.into(), AMQPValue::FieldArray(deaths.into()));
        }
        for (name, value) in more {
            table.insert((*name).into(), AMQPValue::LongString((*value).into()));
        }
        BasicProperties::default().with_headers(table)
    }

    fn at(secs: u64, ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(ms)
    }

    /// A retry goes to the queue of its delay, or the first tier's.
    #[test]
    fn a_delay_names_its_queue() {
        let tiers = tiers();
        assert_eq!(tiers.queue_of(60_000), "orders.retry_60000ms");
        assert_eq!(tiers.queue_of(5_000), "orders.retry_5000ms");
        assert_eq!(tiers.queue_of(7), "orders.retry_5000ms");
    }

    /// The newest entry's time less its tier's delay; nothing from an
    /// entry that is not an expiry from one of the consumer's tiers once.
    #[test]
    fn a_first_copy_first_failed_its_tiers_delay_before_it_left_it() {
        let t = 1_800_000_000;
        let tiers = tiers();
        let first = |deaths| {
            let properties = copy(1, deaths, &[]);
            first_failed_at(&properties, &tiers).and_then(|f| f.time())
        };
        assert_eq!(
            first(vec![death("orders.retry_5000ms", "expired", 1, t)]),
            Some(at(t - 5, 0))
        );
        assert_eq!(
            first(vec![
                death("orders.retry_60000ms", "expired", 1, t),
                death("orders.retry_5000ms", "expired", 1, t - 100),
            ]),
            Some(at(t - 60, 0)),
            "the newest entry"
        );
        assert_eq!(
            first(vec![death("orders.retry_5000ms", "expired", 2, t)]),
            None,
            "an earlier life's time"
        );
        assert_eq!(
            first(vec![death("orders.retry_5000ms", "rejected", 1, t)]),
            None
        );
        assert_eq!(first(vec![death("elsewhere", "expired", 1, t)]), None);
        assert_eq!(first(vec![]), None);
    }

    /// What is written wins over what is derived: `x-first-failed-at`,
    /// then a first copy's `x-retried-at`; a message that never went to a
    /// tier (no count) has no first failure.
    #[test]
    fn what_is_written_wins() {
        let t = 1_800_000_000;
        let tiers = tiers();
        let deaths = || vec![death("orders.retry_5000ms", "expired", 1, t)];
        let stamped = copy(
            1,
            deaths(),
            &[(headers::RETRIED_AT, "2027-01-15T08:00:00.250Z")],
        );
        assert_eq!(
            first_failed_at(&stamped, &tiers),
            Some(FirstFailure::Written(HeaderValue::Str(
                "2027-01-15T08:00:00.250Z"
            )))
        );
        let later = copy(
            2,
            deaths(),
            &[
                (headers::FIRST_FAILED_AT, "2027-01-15T07:00:00.000Z"),
                (headers::RETRIED_AT, "2027-01-15T08:00:00.250Z"),
            ],
        );
        assert_eq!(
            first_failed_at(&later, &tiers).and_then(|f| f.to_text()),
            Some("2027-01-15T07:00:00.000Z".to_owned())
        );
        assert_eq!(implied_first_failure(&later, &tiers), None);
        let replayed = copy(0, deaths(), &[]);
        assert_eq!(first_failed_at(&replayed, &tiers), None);
        assert_eq!(
            first_failed_at(&copy(1, deaths(), &[]), &TierDelays::default()),
            None,
            "a queue whose delay is not known"
        );
        assert_eq!(
            FirstFailure::Derived(at(t, 0)).to_text().as_deref(),
            Some("2027-01-15T08:00:00.000Z")
        );
    }
}
