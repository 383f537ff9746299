//! The entry of a dead letter in the dead-letter index, read from the
//! properties it was published with.

use lapin::BasicProperties;
use lapin::types::AMQPValue;
use rabbit_backoff_core::{ENTRY_HEADERS, EntryValue, IndexEntry, headers};

use crate::transport::frame_guard::packed_headers;

/// The entry of the dead letter published with `properties` and a body of
/// `body_len` bytes: its ids, its timestamp, the headers of
/// [`ENTRY_HEADERS`] (a string as [`EntryValue::Text`], any other value as
/// [`EntryValue::Encoded`], the JSON of lapin's `AMQPValue`) and the body's
/// size. `None` for headers the connection set aside (they nest too deep
/// for lapin): no entry is written, and the readers' count check finds the
/// dead letter.
pub(crate) fn index_entry(properties: &BasicProperties, body_len: usize) -> Option<IndexEntry> {
    if packed_headers(properties).is_some() {
        return None;
    }
    let mut entry = IndexEntry::default();
    entry.message_id = properties.message_id().as_ref().map(|id| id.to_string());
    entry.correlation_id = properties
        .correlation_id()
        .as_ref()
        .map(|id| id.to_string());
    entry.timestamp = *properties.timestamp();
    entry.body_len = body_len as u64;
    if let Some(table) = properties.headers() {
        let table = table.inner();
        // `x-death` is kept only without `x-error` (`set_header`): it is
        // not read, nor serialized, when an error explains the dead letter.
        let explained = table.contains_key(headers::ERROR);
        for name in ENTRY_HEADERS {
            if explained && name == headers::DEATH {
                continue;
            }
            if let Some(value) = table.get(name) {
                entry.set_header(name, entry_value(value));
            }
        }
    }
    Some(entry)
}

/// How an entry keeps a header's value.
fn entry_value(value: &AMQPValue) -> EntryValue {
    match value {
        AMQPValue::LongString(s) => EntryValue::Text(s.as_bytes().to_vec()),
        AMQPValue::ShortString(s) => EntryValue::Text(s.as_str().as_bytes().to_vec()),
        // Read by its meaning, as a string is (`header_view`).
        AMQPValue::ByteArray(b) => EntryValue::Text(b.as_slice().to_vec()),
        // Nothing in an AMQP value fails to serialize (its tables' keys are
        // strings); empty bytes would be an entry its readers skip.
        other => EntryValue::Encoded(serde_json::to_vec(other).unwrap_or_default()),
    }
}

/// The AMQP value an [`EntryValue`] stands for: a long string for text,
/// the decoded value otherwise; `None` for bytes that are not one.
pub(crate) fn header_value(value: &EntryValue) -> Option<AMQPValue> {
    match value {
        EntryValue::Text(bytes) => Some(AMQPValue::LongString(bytes.clone().into())),
        EntryValue::Encoded(bytes) => serde_json::from_slice(bytes).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldTable, ShortString};

    #[test]
    fn an_entry_keeps_ids_failure_headers_and_size_and_gives_their_values_back() {
        let mut headers = FieldTable::default();
        headers.insert("x-error".into(), AMQPValue::LongString("db down".into()));
        headers.insert("x-retry-count".into(), AMQPValue::ShortShortInt(3));
        headers.insert(
            "x-dead-letter-reason".into(),
            AMQPValue::ShortString(ShortString::from("exhausted")),
        );
        headers.insert("tenant".into(), AMQPValue::LongString("acme".into()));
        let mut death = FieldTable::default();
        death.insert("reason".into(), AMQPValue::LongString("expired".into()));
        headers.insert(
            "x-death".into(),
            AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into()),
        );
        let properties = BasicProperties::default()
            .with_message_id("m-1".into())
            .with_timestamp(17)
            .with_headers(headers);
        let entry = index_entry(&properties, 1024).unwrap();
        assert_eq!(entry.message_id.as_deref(), Some("m-1"));
        assert_eq!((entry.timestamp, entry.body_len), (Some(17), 1024));
        let kept: Vec<_> = entry.named_headers().map(|(name, _)| name).collect();
        assert_eq!(
            kept,
            ["x-error", "x-dead-letter-reason", "x-retry-count"],
            "no user header, and no x-death beside x-error"
        );
        assert_eq!(
            header_value(entry.header("x-retry-count").unwrap()),
            Some(AMQPValue::ShortShortInt(3))
        );
        assert_eq!(
            header_value(entry.header("x-dead-letter-reason").unwrap()),
            Some(AMQPValue::LongString("exhausted".into()))
        );
        assert_eq!(header_value(&EntryValue::Encoded(b"{".to_vec())), None);
    }
}
