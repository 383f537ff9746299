//! The key of a dead letter in the dead-letter index, read from its
//! properties the same way in the dead-letter queue and in the index.

use lapin::BasicProperties;
use lapin::types::AMQPValue;
use rabbit_backoff_core::{HeaderValue, headers, index_key};

use rabbit_backoff_runtime::transport::header_view;

/// The broker's account of how it dead-lettered a message.
use rabbit_backoff_core::headers::DEATH as X_DEATH;

/// The headers that enter the key, besides the message id, correlation id
/// and timestamp: those grouping reads, and the broker's `x-death`, which
/// tells apart the failures of messages the broker dead-lettered itself
/// (see [`key_of`] for when it counts).
const KEY_HEADERS: [&str; 6] = [
    headers::ERROR,
    headers::FAILED_AT,
    headers::DEAD_LETTER_REASON,
    headers::ORIGINAL_QUEUE,
    headers::RETRY_COUNT,
    X_DEATH,
];

/// The index key ([`index_key`]) of a dead letter with `properties`. Header
/// values are read by their meaning, not their AMQP type (an integer of any
/// width, a string short or long), because a stream stores messages in
/// another format than a classic queue and gives them back converted.
///
/// `x-death` counts only for a dead letter without `x-error`, one the broker
/// made: an `x-death` that a client published (a dead letter of a retried
/// message, which inherits the header from its retry copy) is dropped by
/// the stream (3.10), or kept where no AMQP reader gets it back (4.x), so
/// the index's entry has none while the queue's message has it, and the
/// keys would never meet. A client's dead letter is told apart by its own
/// failure headers.
pub(crate) fn key_of(properties: &BasicProperties) -> u64 {
    let table = properties.headers().as_ref().map(|t| t.inner());
    let published_by_a_client = table.is_some_and(|t| t.contains_key(headers::ERROR));
    // Every part written into one buffer, each as its range (none: absent),
    // so that a key costs one allocation.
    let mut buffer = Vec::with_capacity(256);
    let mut ranges: [Option<std::ops::Range<usize>>; 3 + KEY_HEADERS.len()] = Default::default();
    let mut put = |buffer: &mut Vec<u8>, i: usize, write: &dyn Fn(&mut Vec<u8>)| {
        let start = buffer.len();
        write(buffer);
        ranges[i] = Some(start..buffer.len());
    };
    if let Some(id) = properties.message_id() {
        put(&mut buffer, 0, &|b| {
            b.extend_from_slice(id.as_str().as_bytes())
        });
    }
    if let Some(id) = properties.correlation_id() {
        put(&mut buffer, 1, &|b| {
            b.extend_from_slice(id.as_str().as_bytes())
        });
    }
    if let Some(at) = properties.timestamp() {
        put(&mut buffer, 2, &|b| b.extend_from_slice(&at.to_le_bytes()));
    }
    for (i, name) in KEY_HEADERS.iter().enumerate() {
        if *name == X_DEATH && published_by_a_client {
            continue;
        }
        if let Some(value) = table.and_then(|t| t.get(*name)) {
            put(&mut buffer, 3 + i, &|b| normalized(value, b));
        }
    }
    index_key(ranges.iter().map(|r| r.clone().map(|r| &buffer[r])))
}

/// `value` as bytes that do not depend on its AMQP width or string type.
fn normalized(value: &AMQPValue, out: &mut Vec<u8>) {
    match value {
        AMQPValue::FieldArray(items) => {
            out.push(b'[');
            for item in items.as_slice() {
                normalized(item, out);
                out.push(b',');
            }
            out.push(b']');
        }
        AMQPValue::FieldTable(table) => {
            out.push(b'{');
            for (name, item) in table.inner() {
                out.extend_from_slice(name.as_str().as_bytes());
                out.push(b':');
                normalized(item, out);
                out.push(b',');
            }
            out.push(b'}');
        }
        AMQPValue::Timestamp(t) => out.extend_from_slice(&t.to_le_bytes()),
        other => match header_view(other) {
            HeaderValue::Str(s) => out.extend_from_slice(s.as_bytes()),
            HeaderValue::Bytes(b) => out.extend_from_slice(b),
            HeaderValue::Int(n) => out.extend_from_slice(&n.to_le_bytes()),
            HeaderValue::Float(f) => out.extend_from_slice(&f.to_bits().to_le_bytes()),
            HeaderValue::Bool(b) => out.push(u8::from(b)),
            HeaderValue::Other(kind) => out.extend_from_slice(kind.as_bytes()),
            unknown => out.extend_from_slice(unknown.type_name().as_bytes()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldTable, LongString, ShortString};

    fn with(retry: AMQPValue, error: AMQPValue) -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert("x-retry-count".into(), retry);
        headers.insert("x-error".into(), error);
        headers.insert("other".into(), AMQPValue::Boolean(true));
        BasicProperties::default()
            .with_message_id("m-1".into())
            .with_headers(headers)
    }

    #[test]
    fn the_key_reads_values_by_meaning_and_ignores_other_headers() {
        let a = with(
            AMQPValue::LongLongInt(3),
            AMQPValue::LongString(LongString::from("db down")),
        );
        let b = with(
            AMQPValue::ShortShortInt(3),
            AMQPValue::ShortString(ShortString::from("db down")),
        );
        assert_eq!(key_of(&a), key_of(&b));
        let c = with(
            AMQPValue::LongLongInt(4),
            AMQPValue::LongString(LongString::from("db down")),
        );
        assert_ne!(key_of(&a), key_of(&c));
        let mut headers = a.headers().clone().unwrap();
        headers.insert("x-stream-offset".into(), AMQPValue::LongLongInt(17));
        assert_eq!(key_of(&a.clone().with_headers(headers)), key_of(&a));
    }

    /// `properties` with an `x-death` of one entry, `reason`.
    fn died(properties: &BasicProperties, reason: &str) -> BasicProperties {
        let mut death = FieldTable::default();
        death.insert("reason".into(), AMQPValue::LongString(reason.into()));
        let mut headers = properties.headers().clone().unwrap_or_default();
        headers.insert(
            "x-death".into(),
            AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into()),
        );
        properties.clone().with_headers(headers)
    }

    #[test]
    fn x_death_tells_apart_only_what_the_broker_dead_lettered() {
        // A client's dead letter (it has `x-error`): the same key with the
        // `x-death` it inherited or without it, as its index entry has none.
        let client = with(
            AMQPValue::LongLongInt(3),
            AMQPValue::LongString(LongString::from("db down")),
        );
        assert_eq!(key_of(&died(&client, "expired")), key_of(&client));
        // The broker's (no `x-error`): `x-death` is all that says why.
        let broker = BasicProperties::default().with_message_id("m-1".into());
        assert_ne!(
            key_of(&died(&broker, "expired")),
            key_of(&died(&broker, "rejected"))
        );
        assert_ne!(key_of(&died(&broker, "expired")), key_of(&broker));
    }
}
