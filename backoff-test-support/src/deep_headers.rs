//! Headers nested deeper than lapin can hold, built by hand as on the wire:
//! a `FieldTable` thousands of levels deep recurses once per level when it is
//! dropped, and overflows a test's stack.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable};

/// The encoded value (type tag first) of a header nested `levels` deep:
/// tables `{"a": …}`, or arrays `[…]` when `arrays`, around `true`.
pub fn value(levels: usize, arrays: bool) -> Vec<u8> {
    let mut value = vec![b't', 1];
    for _ in 1..levels {
        let mut outer = Vec::with_capacity(value.len() + 7);
        if arrays {
            outer.push(b'A');
            outer.extend_from_slice(&(value.len() as u32).to_be_bytes());
        } else {
            outer.push(b'F');
            outer.extend_from_slice(&(value.len() as u32 + 2).to_be_bytes());
            outer.extend_from_slice(&[1, b'a']);
        }
        outer.extend_from_slice(&value);
        value = outer;
    }
    value
}

/// A headers table's encoded entries holding one header, `deep`, whose
/// [`value`] is nested `levels` deep.
pub fn entries(levels: usize, arrays: bool) -> Vec<u8> {
    let mut entries = vec![4];
    entries.extend_from_slice(b"deep");
    entries.extend_from_slice(&value(levels, arrays));
    entries
}

/// The persistent properties of message `deep-{id}` whose headers table is
/// the encoded `entries`, given as the framework's connection takes them:
/// the flat header that stands for headers too deep for lapin, which the
/// connection writes out as the headers themselves.
pub fn properties(id: u64, entries: &[u8]) -> BasicProperties {
    let packed = rabbit_backoff_core::deep_headers::pack(entries).expect("well formed");
    let mut headers = FieldTable::default();
    headers.insert(
        rabbit_backoff_core::headers::DEEP_HEADERS.into(),
        AMQPValue::ByteArray(packed.into()),
    );
    BasicProperties::default()
        .with_message_id(format!("deep-{id}").into())
        .with_delivery_mode(2)
        .with_headers(headers)
}

/// A table nested `levels` levels, `{"a": {"a": … {leaf}}}`, the innermost
/// holding `leaf` (when given) as `"leaf": true`; built without recursion
/// (dropping it still recurses: keep `levels` to what a stack holds).
pub fn table(levels: usize, leaf: bool) -> FieldTable {
    let mut table = FieldTable::default();
    if leaf {
        table.insert("leaf".into(), AMQPValue::Boolean(true));
    }
    for _ in 1..levels {
        let mut outer = FieldTable::default();
        outer.insert("a".into(), AMQPValue::FieldTable(table));
        table = outer;
    }
    table
}
