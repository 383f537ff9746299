//! AMQP 1.0 values as AMQP 0-9-1 field values (lapin's), for a delivery's
//! headers: total, never panicking, nested no deeper than
//! [`MAX_DEPTH`].

use crate::transport::modification::unix_ms_header;
use fe2o3_amqp::types::primitives::{SimpleValue, Value};
use lapin::types::{AMQPValue, ByteArray, FieldArray, FieldTable, LongString, ShortString};

/// How deep lists and maps are followed; a value nested deeper is dropped
/// (with the list or map entry that holds it).
pub(crate) const MAX_DEPTH: usize = 64;

/// `value` as a field value; `None` for what has no 0-9-1 counterpart (a
/// decimal) or is nested deeper than [`MAX_DEPTH`].
pub(crate) fn field_value(value: &Value) -> Option<AMQPValue> {
    convert(value, 0)
}

/// An application property as a field value.
pub(crate) fn simple_field_value(value: &SimpleValue) -> Option<AMQPValue> {
    Some(match value {
        SimpleValue::Null => AMQPValue::Void,
        SimpleValue::Bool(v) => AMQPValue::Boolean(*v),
        SimpleValue::Ubyte(v) => AMQPValue::LongUInt((*v).into()),
        SimpleValue::Ushort(v) => AMQPValue::LongUInt((*v).into()),
        SimpleValue::Uint(v) => AMQPValue::LongUInt(*v),
        SimpleValue::Ulong(v) => ulong(*v),
        SimpleValue::Byte(v) => AMQPValue::LongLongInt((*v).into()),
        SimpleValue::Short(v) => AMQPValue::LongLongInt((*v).into()),
        SimpleValue::Int(v) => AMQPValue::LongLongInt((*v).into()),
        SimpleValue::Long(v) => AMQPValue::LongLongInt(*v),
        SimpleValue::Float(v) => AMQPValue::Float(v.into_inner()),
        SimpleValue::Double(v) => AMQPValue::Double(v.into_inner()),
        SimpleValue::Char(v) => text(&v.to_string()),
        SimpleValue::Timestamp(t) => unix_ms_header(t.milliseconds()),
        SimpleValue::Uuid(u) => text(&uuid_text(u.as_inner())),
        SimpleValue::Binary(b) => AMQPValue::ByteArray(ByteArray::from(b.as_slice())),
        SimpleValue::String(s) => text(s),
        SimpleValue::Symbol(s) => text(s.as_str()),
        SimpleValue::Described(d) => return convert(&d.value, 1),
        SimpleValue::Decimal32(_) | SimpleValue::Decimal64(_) | SimpleValue::Decimal128(_) => {
            return None;
        }
    })
}

fn convert(value: &Value, depth: usize) -> Option<AMQPValue> {
    if depth > MAX_DEPTH {
        return None;
    }
    Some(match value {
        Value::Null => AMQPValue::Void,
        Value::Bool(v) => AMQPValue::Boolean(*v),
        Value::Ubyte(v) => AMQPValue::LongUInt((*v).into()),
        Value::Ushort(v) => AMQPValue::LongUInt((*v).into()),
        Value::Uint(v) => AMQPValue::LongUInt(*v),
        Value::Ulong(v) => ulong(*v),
        Value::Byte(v) => AMQPValue::LongLongInt((*v).into()),
        Value::Short(v) => AMQPValue::LongLongInt((*v).into()),
        Value::Int(v) => AMQPValue::LongLongInt((*v).into()),
        Value::Long(v) => AMQPValue::LongLongInt(*v),
        Value::Float(v) => AMQPValue::Float(v.into_inner()),
        Value::Double(v) => AMQPValue::Double(v.into_inner()),
        Value::Char(v) => text(&v.to_string()),
        Value::Timestamp(t) => unix_ms_header(t.milliseconds()),
        Value::Uuid(u) => text(&uuid_text(u.as_inner())),
        Value::Binary(b) => AMQPValue::ByteArray(ByteArray::from(b.as_slice())),
        Value::String(s) => text(s),
        Value::Symbol(s) => text(s.as_str()),
        Value::Described(d) => return convert(&d.value, depth + 1),
        Value::List(items) => list(items.iter(), depth),
        Value::Array(items) => list(items.0.iter(), depth),
        Value::Map(entries) => {
            let mut table = FieldTable::default();
            for (key, value) in entries.iter() {
                let (Some(key), Some(value)) = (key_text(key), convert(value, depth + 1)) else {
                    continue;
                };
                if let Ok(key) = ShortString::try_new(key) {
                    table.insert(key, value);
                }
            }
            AMQPValue::FieldTable(table)
        }
        Value::Decimal32(_) | Value::Decimal64(_) | Value::Decimal128(_) => return None,
    })
}

fn list<'a>(items: impl Iterator<Item = &'a Value>, depth: usize) -> AMQPValue {
    AMQPValue::FieldArray(FieldArray::from(
        items
            .filter_map(|item| convert(item, depth + 1))
            .collect::<Vec<_>>(),
    ))
}

/// A map key as a field table's key: strings and symbols as they are,
/// numbers and the like as their text; `None` for a key that is itself a
/// list, a map or binary.
fn key_text(key: &Value) -> Option<String> {
    Some(match key {
        Value::String(s) => s.clone(),
        Value::Symbol(s) => s.as_str().to_owned(),
        Value::Bool(v) => v.to_string(),
        Value::Ubyte(v) => v.to_string(),
        Value::Ushort(v) => v.to_string(),
        Value::Uint(v) => v.to_string(),
        Value::Ulong(v) => v.to_string(),
        Value::Byte(v) => v.to_string(),
        Value::Short(v) => v.to_string(),
        Value::Int(v) => v.to_string(),
        Value::Long(v) => v.to_string(),
        Value::Char(v) => v.to_string(),
        Value::Timestamp(t) => t.milliseconds().to_string(),
        Value::Uuid(u) => uuid_text(u.as_inner()),
        _ => return None,
    })
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.as_bytes()))
}

/// An unsigned 64-bit integer: a signed one when it fits (AMQP 0-9-1 has
/// no unsigned 64-bit field value), its decimal text otherwise.
fn ulong(v: u64) -> AMQPValue {
    match i64::try_from(v) {
        Ok(v) => AMQPValue::LongLongInt(v),
        Err(_) => text(&v.to_string()),
    }
}

/// A UUID's 16 bytes as its hyphenated text.
pub(crate) fn uuid_text(bytes: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes(*bytes).hyphenated().to_string()
}

#[cfg(test)]
mod tests {
    use fe2o3_amqp::types::primitives::{Array, OrderedMap, Symbol, Timestamp};

    use super::*;

    fn nested(levels: usize) -> Value {
        let mut value = Value::String("leaf".into());
        for _ in 0..levels {
            value = Value::List(vec![value]);
        }
        value
    }

    fn depth_of(value: &AMQPValue) -> usize {
        match value {
            AMQPValue::FieldArray(items) => {
                1 + items.as_slice().iter().map(depth_of).max().unwrap_or(0)
            }
            AMQPValue::FieldTable(table) => {
                1 + table.inner().values().map(depth_of).max().unwrap_or(0)
            }
            _ => 0,
        }
    }

    #[test]
    fn scalars_become_their_0_9_1_counterparts() {
        assert_eq!(
            field_value(&Value::Int(-7)),
            Some(AMQPValue::LongLongInt(-7))
        );
        assert_eq!(field_value(&Value::Uint(7)), Some(AMQPValue::LongUInt(7)));
        assert_eq!(
            field_value(&Value::Ulong(7)),
            Some(AMQPValue::LongLongInt(7))
        );
        assert_eq!(
            field_value(&Value::Ulong(u64::MAX)),
            Some(text("18446744073709551615"))
        );
        assert_eq!(
            field_value(&Value::Bool(true)),
            Some(AMQPValue::Boolean(true))
        );
        assert_eq!(
            field_value(&Value::Symbol(Symbol::from("s"))),
            Some(text("s"))
        );
        assert_eq!(field_value(&Value::String("é".into())), Some(text("é")));
        assert_eq!(
            field_value(&Value::Timestamp(Timestamp::from_milliseconds(
                1_700_000_005_999
            ))),
            Some(AMQPValue::Timestamp(1_700_000_005))
        );
        assert_eq!(
            field_value(&Value::Timestamp(Timestamp::from_milliseconds(-5))),
            Some(AMQPValue::Timestamp(0))
        );
        assert_eq!(
            field_value(&Value::Binary(vec![0, 255].into())),
            Some(AMQPValue::ByteArray(ByteArray::from(vec![0u8, 255])))
        );
        assert_eq!(field_value(&Value::Null), Some(AMQPValue::Void));
    }

    #[test]
    fn lists_arrays_and_maps_nest() {
        let mut inner = OrderedMap::new();
        inner.insert(Value::Symbol(Symbol::from("k")), Value::Long(1));
        inner.insert(Value::Int(2), Value::List(vec![Value::Bool(false)]));
        // Keys that cannot be a field table's key are left out, not the map.
        inner.insert(Value::List(vec![]), Value::Long(3));
        inner.insert(Value::String("x".repeat(300)), Value::Long(4));
        let value = Value::Array(Array(vec![Value::Map(inner), Value::Uint(9)]));
        let Some(AMQPValue::FieldArray(items)) = field_value(&value) else {
            panic!("an array becomes a field array");
        };
        let items = items.as_slice();
        assert_eq!(items.len(), 2);
        let AMQPValue::FieldTable(table) = &items[0] else {
            panic!("a map becomes a field table: {items:?}");
        };
        assert_eq!(table.inner().len(), 2, "{table:?}");
        assert_eq!(table.inner().get("k"), Some(&AMQPValue::LongLongInt(1)));
        assert_eq!(
            table.inner().get("2"),
            Some(&AMQPValue::FieldArray(
                vec![AMQPValue::Boolean(false)].into()
            ))
        );
        assert_eq!(items[1], AMQPValue::LongUInt(9));
    }

    #[test]
    fn values_nested_too_deep_are_dropped_without_panicking() {
        let within = field_value(&nested(MAX_DEPTH)).expect("64 levels are kept");
        assert_eq!(depth_of(&within), MAX_DEPTH);
        // One level more: the leaf is beyond the limit and dropped, the
        // lists around it stay.
        let beyond = field_value(&nested(MAX_DEPTH + 1)).expect("the outer lists stay");
        assert_eq!(depth_of(&beyond), MAX_DEPTH + 1);
        // Far deeper: still no panic, still bounded.
        let deep = field_value(&nested(1_000)).expect("the outer lists stay");
        assert_eq!(depth_of(&deep), MAX_DEPTH + 1);
    }

    #[test]
    fn decimals_have_no_counterpart_and_described_values_are_unwrapped() {
        assert_eq!(field_value(&Value::Decimal32([0u8; 4].into())), None);
        assert_eq!(
            simple_field_value(&SimpleValue::Ulong(3)),
            Some(AMQPValue::LongLongInt(3))
        );
    }
}
