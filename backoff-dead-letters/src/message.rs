//! [`DeadLetterMessage`]: one dead letter as the operations show it, with
//! a preview of its body.

use std::collections::BTreeMap;

use lapin::types::{AMQPValue, FieldTable, LongString};
use rabbit_backoff_core::{
    DeadLetter, HeaderValue, MAX_HEADER_DEPTH, deep_headers, fingerprint, group_id, headers,
    read_retry_count,
};
use rabbit_backoff_runtime::transport::{Delivery, header_view};
use serde::Serialize;

use rabbit_backoff_runtime::toolkit::packed_headers;

/// How many bytes of the body a summary shows.
pub const BODY_PREVIEW_LEN: usize = 200;

/// What an operator sees of one dead-lettered message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct DeadLetterMessage {
    /// Its 0-based position in the dead-letter queue when it was read.
    pub position: usize,
    /// `x-original-routing-key`: the routing key of the delivery that failed
    /// (`x-original-queue` when a dead letter of the framework leaves it
    /// out: [`DeadLetter::implied`]).
    pub routing_key: Option<String>,
    /// `x-original-queue`: the work queue it failed in.
    pub original_queue: Option<String>,
    /// `x-retry-count` (0 when a dead letter of the framework leaves it out).
    pub retry_count: Option<u32>,
    /// `x-error`.
    pub error: Option<String>,
    /// `x-failed-at`.
    pub failed_at: Option<String>,
    /// `x-dead-letter-reason`: permanent, exhausted or decode.
    pub reason: Option<String>,
    /// The `message_id` property.
    pub message_id: Option<String>,
    /// The `correlation_id` property.
    pub correlation_id: Option<String>,
    /// Every other header, rendered as text.
    pub headers: BTreeMap<String, String>,
    /// The body's length in bytes.
    pub body_len: usize,
    /// The first bytes of the body, as text (invalid UTF-8 replaced).
    pub body_preview: String,
    /// Whether the broker had delivered it before.
    pub redelivered: bool,
    /// Its dead-letter group: the same for every message with the same
    /// reason and error [`fingerprint`](rabbit_backoff_core::fingerprint).
    pub group: String,
}

const OWN_HEADERS: [&str; 7] = [
    headers::ORIGINAL_ROUTING_KEY,
    headers::ORIGINAL_QUEUE,
    headers::RETRY_COUNT,
    headers::ERROR,
    headers::FAILED_AT,
    headers::DEAD_LETTER_REASON,
    headers::ORIGINAL_EXCHANGE,
];

impl DeadLetterMessage {
    pub(crate) fn of(delivery: &Delivery, position: usize) -> Self {
        let set_aside = set_aside_headers(&delivery.properties);
        let table = set_aside
            .as_ref()
            .or(delivery.properties.headers().as_ref());
        // A header that should be text but is not is shown as the table
        // shows any value.
        let text = |name: &str| {
            table
                .and_then(|t| t.inner().get(name))
                .map(|v| render(v, 0))
        };
        let reason = text(headers::DEAD_LETTER_REASON);
        let original_queue = text(headers::ORIGINAL_QUEUE);
        // What a dead letter of the framework leaves out, read as it implies.
        let implied = |name: &str| {
            reason
                .as_ref()
                .and_then(|_| DeadLetter::implied(name, original_queue.as_deref()))
        };
        let retry_count = table
            .and_then(|t| t.inner().get(headers::RETRY_COUNT))
            .map(header_view)
            .or_else(|| implied(headers::RETRY_COUNT))
            .map(|v| read_retry_count(Some(&v)).count);
        let routing_key = text(headers::ORIGINAL_ROUTING_KEY).or_else(|| {
            match implied(headers::ORIGINAL_ROUTING_KEY)? {
                HeaderValue::Str(key) => Some(key.to_owned()),
                _ => None,
            }
        });
        let other_headers = table
            .map(|t| {
                t.inner()
                    .iter()
                    .filter(|(k, _)| !OWN_HEADERS.contains(&k.as_str()))
                    .map(|(k, v)| (k.to_string(), render(v, 1)))
                    .collect()
            })
            .unwrap_or_default();
        let preview_end = delivery.data.len().min(BODY_PREVIEW_LEN);
        let error = text(headers::ERROR);
        let group = group_id(
            reason.as_deref(),
            &fingerprint(error.as_deref().unwrap_or("")),
        );
        DeadLetterMessage {
            position,
            routing_key,
            original_queue,
            retry_count,
            error,
            failed_at: text(headers::FAILED_AT),
            reason,
            message_id: delivery
                .properties
                .message_id()
                .as_ref()
                .map(|s| s.to_string()),
            correlation_id: delivery
                .properties
                .correlation_id()
                .as_ref()
                .map(|s| s.to_string()),
            headers: other_headers,
            body_len: delivery.data.len(),
            body_preview: String::from_utf8_lossy(&delivery.data[..preview_end]).into_owned(),
            redelivered: delivery.redelivered,
            group,
        }
    }
}

/// The headers a delivery stands for when the connection set them aside
/// (they nest deeper than [`MAX_HEADER_DEPTH`]): each header that nests at
/// most that deep as it is, each deeper one as a note saying so.
fn set_aside_headers(properties: &lapin::BasicProperties) -> Option<FieldTable> {
    let packed = packed_headers(properties)?;
    let note = |text: String| AMQPValue::LongString(LongString::from(text));
    let mut shown = FieldTable::default();
    let Ok(entries) = deep_headers::entries(packed) else {
        shown.insert(
            headers::DEEP_HEADERS.into(),
            note("(not shown: the headers are not a well-formed field table)".into()),
        );
        return Some(shown);
    };
    for entry in entries {
        let parsed = (entry.depth <= MAX_HEADER_DEPTH)
            .then(|| lapin::types::parsing::parse_value(entry.value.as_slice()).ok())
            .flatten();
        let value = match parsed {
            Some((_, value)) => value,
            None => note(format!(
                "(not shown: nests {} levels deep, more than {MAX_HEADER_DEPTH}; \
                 the message in the queue is intact)",
                entry.depth
            )),
        };
        shown.insert(entry.name.as_str().into(), value);
    }
    Some(shown)
}

/// The deepest level of nested tables and arrays shown; deeper ones show as
/// `…`, so that a hostile header nested thousands of levels deep is shown
/// without recursing through all of it.
const RENDER_DEPTH: usize = 16;

/// A header value at nesting `level` as text, for people.
fn render(value: &AMQPValue, level: usize) -> String {
    match value {
        AMQPValue::FieldArray(_) | AMQPValue::FieldTable(_) if level > RENDER_DEPTH => {
            "…".to_owned()
        }
        AMQPValue::FieldArray(items) => {
            let items: Vec<String> = items
                .as_slice()
                .iter()
                .map(|v| render(v, level + 1))
                .collect();
            format!("[{}]", items.join(", "))
        }
        AMQPValue::FieldTable(table) => {
            let items: Vec<String> = table
                .inner()
                .iter()
                .map(|(k, v)| format!("{k}: {}", render(v, level + 1)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        AMQPValue::Timestamp(t) => t.to_string(),
        other => match header_view(other) {
            HeaderValue::Str(s) => s.to_owned(),
            HeaderValue::Int(n) => n.to_string(),
            HeaderValue::Float(f) => f.to_string(),
            HeaderValue::Bool(b) => b.to_string(),
            HeaderValue::Bytes(b) => format!("{} bytes", b.len()),
            HeaderValue::Other(kind) => kind.to_owned(),
            unknown => unknown.type_name().to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::stream_protocol::Unsettled;
    use lapin::BasicProperties;
    use rabbit_backoff_core::DeadLetterReason;
    use rabbit_backoff_runtime::toolkit::republish_properties;
    use rabbit_backoff_runtime::transport::Acker;

    fn shown(dead_letter: DeadLetter<'_>) -> DeadLetterMessage {
        // A dead letter's headers as the runtime writes them: those it
        // leaves out are absent.
        let set: Vec<_> = dead_letter
            .headers()
            .into_iter()
            .filter_map(|(name, value)| Some((name, value?)))
            .collect();
        let properties = republish_properties(&BasicProperties::default(), &set);
        let delivery = Delivery::new(b"{}".to_vec(), Acker::new(Unsettled))
            .with_route("orders.dlx", "orders.dlq")
            .with_properties(properties);
        DeadLetterMessage::of(&delivery, 0)
    }

    /// What a dead letter leaves out is shown as it implies: no count is 0,
    /// no routing key the queue's name.
    #[test]
    fn a_dead_letter_shows_what_it_leaves_out() {
        let permanent = DeadLetter::new(DeadLetterReason::Permanent, "no such order", "t")
            .with_origin("orders", "orders", "orders");
        let m = shown(permanent);
        assert_eq!(m.retry_count, Some(0));
        assert_eq!(m.routing_key.as_deref(), Some("orders"));
        assert_eq!(m.original_queue.as_deref(), Some("orders"));
        assert!(m.headers.is_empty(), "{:?}", m.headers);

        let routed = DeadLetter::new(DeadLetterReason::Exhausted, "db down", "t")
            .with_retry_count(3)
            .with_origin("orders", "", "orders.eu");
        let m = shown(routed);
        assert_eq!(m.retry_count, Some(3));
        assert_eq!(m.routing_key.as_deref(), Some("orders.eu"));
    }

    /// A dead letter written before the count was always written (a
    /// permanent failure without `x-retry-count`) still shows a count of 0.
    #[test]
    fn an_older_dead_letter_without_a_count_shows_0() {
        let mut headers = lapin::types::FieldTable::default();
        for (name, value) in [
            ("x-dead-letter-reason", "permanent"),
            ("x-error", "no such order"),
            ("x-failed-at", "2026-12-04T08:00:00.000Z"),
            ("x-original-queue", "orders"),
        ] {
            headers.insert(
                name.into(),
                lapin::types::AMQPValue::LongString(value.into()),
            );
        }
        let delivery = Delivery::new(b"{}".to_vec(), Acker::new(Unsettled))
            .with_route("orders.dlx", "orders.dlq")
            .with_properties(BasicProperties::default().with_headers(headers));
        let m = DeadLetterMessage::of(&delivery, 0);
        assert_eq!(m.retry_count, Some(0));
        assert_eq!(m.routing_key.as_deref(), Some("orders"));
    }

    /// A reason or queue header that is not text is shown as the headers'
    /// table shows any value, not as a Rust value's `Debug` text.
    #[test]
    fn a_header_that_is_not_text_is_shown_as_its_value() {
        let mut headers = lapin::types::FieldTable::default();
        headers.insert(
            "x-dead-letter-reason".into(),
            lapin::types::AMQPValue::LongLongInt(3),
        );
        headers.insert(
            "x-original-queue".into(),
            lapin::types::AMQPValue::Boolean(true),
        );
        let delivery = Delivery::new(b"{}".to_vec(), Acker::new(Unsettled))
            .with_properties(BasicProperties::default().with_headers(headers));
        let m = DeadLetterMessage::of(&delivery, 0);
        assert_eq!(m.reason.as_deref(), Some("3"));
        assert_eq!(m.original_queue.as_deref(), Some("true"));
    }

    /// A message the broker dead-lettered itself (no
    /// `x-dead-letter-reason`) implies nothing.
    #[test]
    fn a_message_the_framework_did_not_dead_letter_implies_nothing() {
        let delivery = Delivery::new(b"{}".to_vec(), Acker::new(Unsettled));
        let m = DeadLetterMessage::of(&delivery, 0);
        assert_eq!((m.retry_count, m.routing_key), (None, None));
    }
}
