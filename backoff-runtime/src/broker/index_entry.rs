//! The entry of a dead letter in the dead-letter index, read from the
//! properties it was published with.

use lapin::BasicProperties;
use lapin::types::AMQPValue;
use rabbit_backoff_core::{ENTRY_HEADERS, EntryValue, IndexEntry, PackedEntry};

use crate::transport::frame_guard::packed_headers;

/// The entry of the dead letter published with `properties` and a body of
/// `body_len` bytes ([`packed_entry`]), as an [`IndexEntry`].
pub(crate) fn index_entry(properties: &BasicProperties, body_len: usize) -> Option<IndexEntry> {
    packed_entry(properties, body_len).map(|entry| entry.to_entry())
}

/// The entry of the dead letter published with `properties` and a body of
/// `body_len` bytes, in one buffer: its ids, its timestamp, the headers of
/// [`ENTRY_HEADERS`] (a string as [`EntryValue::Text`], any other value as
/// [`EntryValue::Encoded`], the JSON of lapin's `AMQPValue`; `x-death` only
/// without `x-error`) and the body's size. `None` for headers the
/// connection set aside (they nest too deep for lapin): no entry is
/// written, and the readers' count check finds the dead letter.
pub(crate) fn packed_entry(properties: &BasicProperties, body_len: usize) -> Option<PackedEntry> {
    if packed_headers(properties).is_some() {
        return None;
    }
    let mut entry = PackedEntry::builder(*properties.timestamp(), body_len as u64);
    if let Some(id) = properties.message_id() {
        entry.message_id(id.as_str());
    }
    if let Some(id) = properties.correlation_id() {
        entry.correlation_id(id.as_str());
    }
    if let Some(table) = properties.headers() {
        let table = table.inner();
        for name in ENTRY_HEADERS {
            let Some(value) = table.get(name) else {
                continue;
            };
            match value {
                AMQPValue::LongString(s) => entry.text(name, s.as_bytes()),
                AMQPValue::ShortString(s) => entry.text(name, s.as_str().as_bytes()),
                // Read by its meaning, as a string is (`header_view`).
                AMQPValue::ByteArray(b) => entry.text(name, b.as_slice()),
                // Nothing in an AMQP value fails to serialize (its tables'
                // keys are strings); an empty value would be one its readers
                // skip.
                other => entry.encoded(name, |out| {
                    let _ = serde_json::to_writer(out, other);
                }),
            };
        }
    }
    Some(entry.finish())
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
