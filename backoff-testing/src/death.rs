//! The `x-death` header, written exactly as RabbitMQ 3.10's
//! `rabbit_dead_letter:make_msg/5` and `update_x_death_header/2` write it,
//! and read back for tests.
//!
//! - Each entry is a table: `count` (long), `reason`, `queue`, `exchange`
//!   (long strings), `time` (timestamp, seconds), `routing-keys` (array of
//!   long strings) and, when the message had a per-message TTL,
//!   `original-expiration` (long string).
//! - A (queue, reason) pair seen before has its entry's `count` incremented
//!   and moved to the front; its other fields keep their first values.
//! - The first death also sets `x-first-death-reason`, `-queue` and
//!   `-exchange`; later ones leave them alone.
//! - Before a (queue, reason) is looked up, the entries are grouped by
//!   `group_by_queue_and_reason`, which (as in RabbitMQ) returns them in
//!   reverse order when there are two or more.
//! - An `x-death` that is not an array is replaced by a single entry.

use std::collections::BTreeMap;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};

/// Why a message was dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Its TTL ran out at the head of its queue.
    Expired,
    /// A consumer rejected it without requeue.
    Rejected,
    /// Its queue overflowed `x-max-length` (drop-head).
    Maxlen,
    /// A quorum queue returned it more often than `x-delivery-limit`.
    DeliveryLimit,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Expired => "expired",
            Reason::Rejected => "rejected",
            Reason::Maxlen => "maxlen",
            Reason::DeliveryLimit => "delivery_limit",
        }
    }
}

/// What one dead-lettering records.
pub(crate) struct DeathEvent<'a> {
    pub(crate) reason: Reason,
    /// The queue the message died in.
    pub(crate) queue: &'a str,
    /// The exchange the message was last published (or dead-lettered) to.
    pub(crate) exchange: &'a str,
    /// Its routing key at that time.
    pub(crate) routing_key: &'a str,
    /// Seconds since the Unix epoch.
    pub(crate) time: u64,
}

use rabbit_backoff_core::headers::DEATH as X_DEATH;

/// The headers of the dead-lettered copy of a message with `properties`.
pub(crate) fn record(properties: &BasicProperties, event: &DeathEvent<'_>) -> FieldTable {
    let mut info: BTreeMap<ShortString, AMQPValue> = BTreeMap::new();
    info.insert("reason".into(), longstr(event.reason.as_str()));
    info.insert("queue".into(), longstr(event.queue));
    info.insert("time".into(), AMQPValue::Timestamp(event.time));
    info.insert("exchange".into(), longstr(event.exchange));
    info.insert(
        "routing-keys".into(),
        AMQPValue::FieldArray(FieldArray::from(vec![longstr(event.routing_key)])),
    );
    if let Some(expiration) = properties.expiration() {
        info.insert("original-expiration".into(), longstr(expiration.as_str()));
    }
    let fresh = |mut info: BTreeMap<ShortString, AMQPValue>| {
        info.insert("count".into(), AMQPValue::LongLongInt(1));
        AMQPValue::FieldTable(FieldTable::from(info))
    };

    let mut headers: BTreeMap<ShortString, AMQPValue> = properties
        .headers()
        .as_ref()
        .map(|h| h.inner().clone())
        .unwrap_or_default();
    let deaths = match headers.get(X_DEATH) {
        None => {
            headers.insert(
                "x-first-death-reason".into(),
                longstr(event.reason.as_str()),
            );
            headers.insert("x-first-death-queue".into(), longstr(event.queue));
            headers.insert("x-first-death-exchange".into(), longstr(event.exchange));
            vec![fresh(info)]
        }
        Some(AMQPValue::FieldArray(entries)) => {
            let grouped = group_by_queue_and_reason(entries.as_slice());
            let (matches, others): (Vec<AMQPValue>, Vec<AMQPValue>) = grouped
                .into_iter()
                .partition(|entry| same_queue_and_reason(entry, event));
            let first = match matches.into_iter().next() {
                Some(AMQPValue::FieldTable(entry)) => {
                    AMQPValue::FieldTable(FieldTable::from(incremented(entry.inner())))
                }
                _ => fresh(info),
            };
            std::iter::once(first).chain(others).collect()
        }
        // Some client rewrote x-death as another type: RabbitMQ resets it.
        Some(_) => vec![fresh(info)],
    };
    headers.insert(
        X_DEATH.into(),
        AMQPValue::FieldArray(FieldArray::from(deaths)),
    );
    FieldTable::from(headers)
}

/// Whether routing a message with these headers to `queue` closes a
/// dead-letter cycle with no rejection in it (RabbitMQ then drops it for that
/// queue): `queue` appears in `x-death`, and no entry up to and including its
/// first appearance says `rejected`.
pub(crate) fn is_cycle(queue: &str, headers: Option<&FieldTable>) -> bool {
    let Some(AMQPValue::FieldArray(deaths)) = headers.and_then(|h| h.inner().get(X_DEATH)) else {
        return false;
    };
    let deaths = deaths.as_slice();
    let Some(at) = deaths.iter().position(|d| match d {
        AMQPValue::FieldTable(t) => t.inner().get("queue") == Some(&longstr(queue)),
        _ => false,
    }) else {
        return false;
    };
    deaths[..=at].iter().all(|d| match d {
        AMQPValue::FieldTable(t) => t.inner().get("reason") != Some(&longstr("rejected")),
        // Something a client put there: not a fully automatic cycle.
        _ => false,
    })
}

/// `group_by_queue_and_reason/1`: one entry per (queue, reason), the first
/// one found, with a `count` of how many there were if it had none. With two
/// entries or more, the result is in reverse order (RabbitMQ folds by
/// prepending).
fn group_by_queue_and_reason(entries: &[AMQPValue]) -> Vec<AMQPValue> {
    if entries.len() <= 1 {
        return entries.to_vec();
    }
    let key = |entry: &AMQPValue| match entry {
        AMQPValue::FieldTable(t) => (
            t.inner().get("queue").cloned(),
            t.inner().get("reason").cloned(),
        ),
        _ => (None, None),
    };
    let mut seen: Vec<(Option<AMQPValue>, Option<AMQPValue>)> = Vec::new();
    let mut grouped = Vec::new();
    for entry in entries {
        let k = key(entry);
        if seen.contains(&k) {
            continue;
        }
        let matching: Vec<&AMQPValue> = entries.iter().filter(|e| key(e) == k).collect();
        let first = match matching[0] {
            AMQPValue::FieldTable(t) if !t.contains_key("count") => {
                let mut inner = t.inner().clone();
                inner.insert(
                    "count".into(),
                    AMQPValue::LongLongInt(matching.len() as i64),
                );
                AMQPValue::FieldTable(FieldTable::from(inner))
            }
            other => other.clone(),
        };
        grouped.push(first);
        seen.push(k);
    }
    grouped.reverse();
    grouped
}

fn same_queue_and_reason(entry: &AMQPValue, event: &DeathEvent<'_>) -> bool {
    match entry {
        AMQPValue::FieldTable(t) => {
            t.inner().get("queue") == Some(&longstr(event.queue))
                && t.inner().get("reason") == Some(&longstr(event.reason.as_str()))
        }
        _ => false,
    }
}

fn incremented(entry: &BTreeMap<ShortString, AMQPValue>) -> BTreeMap<ShortString, AMQPValue> {
    let mut entry = entry.clone();
    let count = entry.get("count").and_then(integer).unwrap_or(0);
    entry.insert("count".into(), AMQPValue::LongLongInt(count + 1));
    entry
}

fn longstr(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.as_bytes()))
}

/// Any AMQP integer, widened.
pub(crate) fn integer(value: &AMQPValue) -> Option<i64> {
    match value {
        AMQPValue::ShortShortInt(v) => Some((*v).into()),
        AMQPValue::ShortShortUInt(v) => Some((*v).into()),
        AMQPValue::ShortInt(v) => Some((*v).into()),
        AMQPValue::ShortUInt(v) => Some((*v).into()),
        AMQPValue::LongInt(v) => Some((*v).into()),
        AMQPValue::LongUInt(v) => Some((*v).into()),
        AMQPValue::LongLongInt(v) => Some(*v),
        AMQPValue::Timestamp(v) => i64::try_from(*v).ok(),
        _ => None,
    }
}

/// A string value (short or long string, valid UTF-8).
pub(crate) fn string(value: &AMQPValue) -> Option<&str> {
    match value {
        AMQPValue::ShortString(s) => Some(s.as_str()),
        AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok(),
        _ => None,
    }
}

/// One entry of a message's `x-death` header, as
/// [`Message::x_death`](crate::Message::x_death) reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Death {
    /// The queue the message was dead-lettered from.
    pub queue: String,
    /// `expired`, `rejected`, `maxlen` or `delivery_limit`.
    pub reason: String,
    /// How many times it died in this queue for this reason.
    pub count: i64,
    /// The exchange it had been published to before it died there.
    pub exchange: String,
    /// The routing keys it had been published with.
    pub routing_keys: Vec<String>,
    /// When it first died there, in seconds since the Unix epoch.
    pub time: Option<u64>,
    /// Its per-message TTL (`expiration`), if it had one.
    pub original_expiration: Option<String>,
}

/// The entries of an `x-death` header, newest first; entries that are not
/// tables are skipped, missing fields read as empty.
pub(crate) fn read(headers: Option<&FieldTable>) -> Vec<Death> {
    let Some(AMQPValue::FieldArray(entries)) = headers.and_then(|h| h.inner().get(X_DEATH)) else {
        return Vec::new();
    };
    entries
        .as_slice()
        .iter()
        .filter_map(|entry| match entry {
            AMQPValue::FieldTable(t) => Some(t.inner()),
            _ => None,
        })
        .map(|t| {
            let text = |key: &str| t.get(key).and_then(string).unwrap_or_default().to_owned();
            Death {
                queue: text("queue"),
                reason: text("reason"),
                count: t.get("count").and_then(integer).unwrap_or(0),
                exchange: text("exchange"),
                routing_keys: match t.get("routing-keys") {
                    Some(AMQPValue::FieldArray(keys)) => keys
                        .as_slice()
                        .iter()
                        .filter_map(string)
                        .map(str::to_owned)
                        .collect(),
                    _ => Vec::new(),
                },
                time: match t.get("time") {
                    Some(AMQPValue::Timestamp(s)) => Some(*s),
                    _ => None,
                },
                original_expiration: t
                    .get("original-expiration")
                    .and_then(string)
                    .map(str::to_owned),
            }
        })
        .collect()
}
