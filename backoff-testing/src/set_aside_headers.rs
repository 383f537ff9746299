//! Headers nested deeper than the framework reads, delivered as RabbitMQ's
//! connection hands them to the runtime: set aside in one flat header.
//!
//! On a real broker the runtime's frame guard finds headers nested deeper
//! than [`MAX_HEADER_DEPTH`] in the content-header frame, before lapin
//! parses them, and replaces them with the packed bytes under
//! [`DEEP_HEADERS`](headers::DEEP_HEADERS); the consumer then rejects the
//! delivery. The in-memory broker delivers such headers the same way, so a
//! consumer sees the same thing on both.

use lapin::BasicProperties;
use lapin::types::generation::gen_field_table;
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff_core::{MAX_HEADER_DEPTH, deep_headers, headers};

/// The properties a consumer is handed for `properties`: the same, or with
/// headers too deep set aside as the frame guard sets them aside.
pub(crate) fn as_delivered(properties: &BasicProperties) -> Option<BasicProperties> {
    let table = properties.headers().as_ref()?;
    if depth(table) <= MAX_HEADER_DEPTH {
        return None;
    }
    let (encoded, _) = cookie_factory::r#gen(gen_field_table(table), Vec::new()).ok()?;
    // The encoded table starts with its 4-byte length; the entries follow.
    let packed = deep_headers::pack(encoded.get(4..)?).ok()?;
    let mut flat = FieldTable::default();
    flat.insert(
        headers::DEEP_HEADERS.into(),
        AMQPValue::ByteArray(packed.into()),
    );
    Some(properties.clone().with_headers(flat))
}

/// How deeply `table` nests (a table of scalars is 1), without recursion.
fn depth(table: &FieldTable) -> usize {
    let mut deepest = 1;
    let mut pending: Vec<(&AMQPValue, usize)> = table.inner().values().map(|v| (v, 1)).collect();
    while let Some((value, level)) = pending.pop() {
        match value {
            AMQPValue::FieldTable(inner) => {
                deepest = deepest.max(level + 1);
                pending.extend(inner.inner().values().map(|v| (v, level + 1)));
            }
            AMQPValue::FieldArray(items) => {
                deepest = deepest.max(level + 1);
                pending.extend(items.as_slice().iter().map(|v| (v, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use rabbit_backoff_test_support::deep_headers as deep;

    #[test]
    fn shallow_headers_are_delivered_as_they_are() {
        let properties =
            BasicProperties::default().with_headers(deep::table(MAX_HEADER_DEPTH, true));
        assert_eq!(
            depth(&deep::table(MAX_HEADER_DEPTH, true)),
            MAX_HEADER_DEPTH
        );
        assert!(as_delivered(&properties).is_none());
    }

    #[test]
    fn deep_headers_are_set_aside_and_unpack_to_the_original_entries() {
        let table = deep::table(MAX_HEADER_DEPTH + 1, true);
        let properties = BasicProperties::default()
            .with_message_id("m".into())
            .with_headers(table.clone());
        let delivered = as_delivered(&properties).expect("set aside");
        assert_eq!(delivered.message_id(), properties.message_id());
        let headers = delivered.headers().as_ref().unwrap();
        assert_eq!(headers.inner().len(), 1);
        let Some(AMQPValue::ByteArray(packed)) = headers.inner().get(headers::DEEP_HEADERS) else {
            panic!("the flat header");
        };
        let unpacked = deep_headers::unpack(packed.as_slice()).expect("packed");
        let (encoded, _) = cookie_factory::r#gen(gen_field_table(&table), Vec::new()).unwrap();
        assert_eq!(unpacked.entries, encoded[4..]);
        assert_eq!(unpacked.depth, MAX_HEADER_DEPTH + 1);
    }
}
