//! Measuring a message's properties as they go on the wire: the size of
//! its content header.
//!
//! Every walk here is iterative, so that its cost in stack does not depend
//! on how deeply headers nest.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};

/// The encoded size of a table as a property or a nested value's payload:
/// its 4-byte length and every entry.
pub(crate) fn table_len(table: &FieldTable) -> usize {
    let mut len = 4;
    let mut pending = Vec::new();
    for (name, value) in table.inner() {
        len += 1 + name.as_str().len();
        pending.push(value);
    }
    len + walk(pending)
}

/// The encoded size of one value, type tag included.
pub(crate) fn value_len(value: &AMQPValue) -> usize {
    walk(vec![value])
}

/// The encoded size of `pending` values and of everything in them.
fn walk(mut pending: Vec<&AMQPValue>) -> usize {
    let mut len = 0;
    while let Some(value) = pending.pop() {
        len += 1; // the type tag
        match value {
            AMQPValue::FieldTable(inner) => {
                len += 4;
                for (name, value) in inner.inner() {
                    len += 1 + name.as_str().len();
                    pending.push(value);
                }
            }
            AMQPValue::FieldArray(items) => {
                len += 4;
                pending.extend(items.as_slice().iter());
            }
            scalar => len += scalar_len(scalar),
        }
    }
    len
}

/// The payload size of a value that holds no other values.
fn scalar_len(value: &AMQPValue) -> usize {
    match value {
        AMQPValue::Boolean(_) | AMQPValue::ShortShortInt(_) | AMQPValue::ShortShortUInt(_) => 1,
        AMQPValue::ShortInt(_) | AMQPValue::ShortUInt(_) => 2,
        AMQPValue::LongInt(_) | AMQPValue::LongUInt(_) | AMQPValue::Float(_) => 4,
        AMQPValue::LongLongInt(_) | AMQPValue::Double(_) | AMQPValue::Timestamp(_) => 8,
        AMQPValue::DecimalValue(_) => 5,
        AMQPValue::ShortString(s) => 1 + s.as_str().len(),
        AMQPValue::LongString(s) => 4 + s.as_bytes().len(),
        AMQPValue::ByteArray(b) => 4 + b.as_slice().len(),
        AMQPValue::Void => 0,
        AMQPValue::FieldTable(_) | AMQPValue::FieldArray(_) => 0,
    }
}

/// The size of the content-header frame's payload that carries `properties`:
/// class (2), weight (2), body size (8), property flags (2) and each property.
pub(crate) fn content_header_len(properties: &BasicProperties) -> usize {
    let short = |s: &Option<ShortString>| s.as_ref().map_or(0, |s| 1 + s.as_str().len());
    let byte = |b: &Option<u8>| usize::from(b.is_some());
    14 + short(properties.content_type())
        + short(properties.content_encoding())
        + properties.headers().as_ref().map_or(0, table_len)
        + byte(properties.delivery_mode())
        + byte(properties.priority())
        + short(properties.correlation_id())
        + short(properties.reply_to())
        + short(properties.expiration())
        + short(properties.message_id())
        + properties.timestamp().map_or(0, |_| 8)
        + short(properties.kind())
        + short(properties.user_id())
        + short(properties.app_id())
        + short(properties.cluster_id())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use lapin::protocol::basic::gen_properties;
    use lapin::types::{DecimalValue, LongString};

    /// What amq-protocol itself writes for these properties.
    pub(crate) fn encoded(properties: &BasicProperties) -> usize {
        let (_, len) = cookie_factory::r#gen(gen_properties(properties), Vec::new()).unwrap();
        12 + len as usize
    }

    fn every_type() -> FieldTable {
        let mut inner = FieldTable::default();
        inner.insert("n".into(), AMQPValue::LongLongInt(1));
        let mut t = FieldTable::default();
        t.insert("bool".into(), AMQPValue::Boolean(true));
        t.insert("i8".into(), AMQPValue::ShortShortInt(-1));
        t.insert("u8".into(), AMQPValue::ShortShortUInt(1));
        t.insert("i16".into(), AMQPValue::ShortInt(-1));
        t.insert("u16".into(), AMQPValue::ShortUInt(1));
        t.insert("i32".into(), AMQPValue::LongInt(-1));
        t.insert("u32".into(), AMQPValue::LongUInt(1));
        t.insert("i64".into(), AMQPValue::LongLongInt(-1));
        t.insert("f32".into(), AMQPValue::Float(1.5));
        t.insert("f64".into(), AMQPValue::Double(1.5));
        t.insert(
            "dec".into(),
            AMQPValue::DecimalValue(DecimalValue { scale: 2, value: 1 }),
        );
        t.insert("ss".into(), AMQPValue::ShortString("short".into()));
        t.insert("ls".into(), AMQPValue::LongString(LongString::from("long")));
        t.insert("ts".into(), AMQPValue::Timestamp(7));
        t.insert("bytes".into(), AMQPValue::ByteArray(vec![1, 2, 3].into()));
        t.insert("void".into(), AMQPValue::Void);
        t.insert(
            "array".into(),
            AMQPValue::FieldArray(
                vec![
                    AMQPValue::FieldTable(inner.clone()),
                    AMQPValue::FieldArray(vec![AMQPValue::Boolean(false)].into()),
                ]
                .into(),
            ),
        );
        t.insert("table".into(), AMQPValue::FieldTable(inner));
        t
    }

    #[test]
    fn sizes_match_the_encoder_for_every_type_and_property() {
        let properties = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_content_encoding("gzip".into())
            .with_headers(every_type())
            .with_delivery_mode(2)
            .with_priority(3)
            .with_correlation_id("c".into())
            .with_reply_to("r".into())
            .with_expiration("100".into())
            .with_message_id("m-1".into())
            .with_timestamp(1)
            .with_type("t".into())
            .with_user_id("guest".into())
            .with_app_id("app".into())
            .with_cluster_id("cl".into());
        assert_eq!(content_header_len(&properties), encoded(&properties));
        assert_eq!(
            content_header_len(&BasicProperties::default()),
            encoded(&BasicProperties::default())
        );
    }

    #[test]
    fn measures_deep_headers_without_recursion() {
        // Run where dropping the value (which recurses) has room.
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(|| {
                let table = rabbit_backoff_test_support::deep_headers::table(20_000, false);
                assert_eq!(table_len(&table), 4 + 19_999 * (2 + 1 + 4));
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
