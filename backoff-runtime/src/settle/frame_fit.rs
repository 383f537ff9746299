//! Measuring a message's properties as they go on the wire, and shrinking a
//! copy to fit one frame by the core's plan ([`rabbit_backoff_core::fit_copy`]).
//!
//! Every walk here is iterative, so that its cost in stack does not depend
//! on how deeply headers nest.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use rabbit_backoff_core::{CopySizes, Fit, ShrinkPlan, fit_copy, headers, truncate_error_to};

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
fn value_len(value: &AMQPValue) -> usize {
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

/// A copy that cannot fit in one frame, whatever the framework shrinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge {
    /// Its content header's size after shrinking.
    pub(crate) size: usize,
    /// The largest content header the connection's frame allows.
    pub(crate) limit: usize,
}

/// `properties` as they can be published with at most `limit` bytes of
/// content header: unchanged when they fit, shrunk by the core's plan when
/// that is enough.
pub(crate) fn fit_to_frame(
    properties: BasicProperties,
    limit: usize,
) -> Result<BasicProperties, TooLarge> {
    let total = content_header_len(&properties);
    if total <= limit {
        return Ok(properties);
    }
    let table = properties.headers().clone().unwrap_or_default();
    let sizes = CopySizes {
        total,
        history: history(&table)
            .map(|items| items.as_slice().iter().map(value_len).collect())
            .unwrap_or_default(),
        error: error_text(&table).map_or(0, str::len),
        original: headers::ORIGINAL
            .iter()
            .filter_map(|name| {
                table
                    .inner()
                    .get(*name)
                    .map(|v| 1 + name.len() + value_len(v))
            })
            .sum(),
    };
    match fit_copy(&sizes, limit) {
        Fit::AsIs => Ok(properties),
        Fit::TooLarge { size, limit } => Err(TooLarge { size, limit }),
        Fit::Shrunk(plan) => Ok(properties.with_headers(shrink(table, &plan))),
    }
}

/// `properties` without the largest of the user's headers, as few as fit in
/// `limit`, with `x-dropped-headers` naming each one left out; `None` when
/// even without every user header they do not fit.
pub(crate) fn without_largest_headers(
    properties: BasicProperties,
    limit: usize,
) -> Option<(BasicProperties, Vec<String>)> {
    let table = properties.headers().clone().unwrap_or_default();
    let users: Vec<(&ShortString, &AMQPValue)> = table
        .inner()
        .iter()
        .filter(|(name, _)| !headers::FRAMEWORK.contains(&name.as_str()))
        .collect();
    let sizes: Vec<usize> = users
        .iter()
        .map(|(name, value)| 1 + name.as_str().len() + value_len(value))
        .collect();
    let mut excess = content_header_len(&properties).saturating_sub(limit);
    loop {
        let dropped = rabbit_backoff_core::headers_to_drop(&sizes, excess);
        let names: Vec<String> = dropped
            .iter()
            .map(|&i| format!("{} ({} bytes)", users[i].0, sizes[i]))
            .collect();
        let mut kept = FieldTable::default();
        for (name, value) in table.inner() {
            if !dropped.iter().any(|&i| users[i].0 == name) {
                kept.insert(name.clone(), value.clone());
            }
        }
        let list = names
            .iter()
            .map(|n| AMQPValue::LongString(LongString::from(n.as_str())))
            .collect::<Vec<_>>();
        kept.insert(
            ShortString::from(headers::DROPPED_HEADERS),
            AMQPValue::FieldArray(list.into()),
        );
        let candidate = properties.clone().with_headers(kept);
        let size = content_header_len(&candidate);
        if size <= limit {
            return Some((candidate, names));
        }
        if dropped.len() == users.len() {
            return None;
        }
        // The list of dropped headers took room of its own: shed that too.
        excess += size - limit;
    }
}

fn shrink(table: FieldTable, plan: &ShrinkPlan) -> FieldTable {
    let mut shrunk = FieldTable::default();
    for (name, value) in table.inner() {
        let name_str = name.as_str();
        let value = match value {
            AMQPValue::FieldArray(items) if name_str == headers::REPLAY_HISTORY => {
                let kept = items.as_slice().iter().skip(plan.drop_history).cloned();
                AMQPValue::FieldArray(FieldArray::from(kept.collect::<Vec<_>>()))
            }
            _ if name_str == headers::ERROR => match (plan.error_len, error_text(&table)) {
                (Some(max), Some(text)) => {
                    AMQPValue::LongString(LongString::from(truncate_error_to(text, max)))
                }
                _ => value.clone(),
            },
            _ if plan.drop_original && headers::ORIGINAL.contains(&name_str) => continue,
            _ => value.clone(),
        };
        shrunk.insert(name.clone(), value);
    }
    shrunk
}

fn history(table: &FieldTable) -> Option<&FieldArray> {
    match table.inner().get(headers::REPLAY_HISTORY) {
        Some(AMQPValue::FieldArray(items)) => Some(items),
        _ => None,
    }
}

fn error_text(table: &FieldTable) -> Option<&str> {
    match table.inner().get(headers::ERROR) {
        Some(AMQPValue::LongString(s)) => std::str::from_utf8(s.as_bytes()).ok(),
        Some(AMQPValue::ShortString(s)) => Some(s.as_str()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::protocol::basic::gen_properties;
    use lapin::types::{DecimalValue, LongString};

    /// What amq-protocol itself writes for these properties.
    fn encoded(properties: &BasicProperties) -> usize {
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

    /// A table nested `depth` levels, built without recursion.
    fn nested(depth: usize) -> FieldTable {
        let mut table = FieldTable::default();
        for _ in 1..depth {
            let mut outer = FieldTable::default();
            outer.insert("a".into(), AMQPValue::FieldTable(table));
            table = outer;
        }
        table
    }

    #[test]
    fn measures_deep_headers_without_recursion() {
        // Run where dropping the value (which recurses) has room.
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(|| {
                let table = nested(20_000);
                assert_eq!(table_len(&table), 4 + 19_999 * (2 + 1 + 4));
            })
            .unwrap()
            .join()
            .unwrap();
    }

    fn history_entry(error: &str) -> AMQPValue {
        let mut entry = FieldTable::default();
        entry.insert(headers::ERROR.into(), AMQPValue::LongString(error.into()));
        AMQPValue::FieldTable(entry)
    }

    #[test]
    fn shrinks_history_first_then_the_error_then_the_origin() {
        let error = "e".repeat(4_096);
        let mut table = FieldTable::default();
        let entries: Vec<AMQPValue> = (0..40).map(|_| history_entry(&error)).collect();
        table.insert(
            headers::REPLAY_HISTORY.into(),
            AMQPValue::FieldArray(entries.into()),
        );
        table.insert(
            headers::ERROR.into(),
            AMQPValue::LongString(error.as_str().into()),
        );
        table.insert(
            headers::ORIGINAL_QUEUE.into(),
            AMQPValue::LongString("q".into()),
        );
        let properties = BasicProperties::default().with_headers(table);
        assert!(content_header_len(&properties) > 131_064);

        let fitted = fit_to_frame(properties, 131_064).expect("fits once shrunk");
        assert!(content_header_len(&fitted) <= 131_064);
        assert_eq!(content_header_len(&fitted), encoded(&fitted));
        let h = fitted.headers().as_ref().unwrap();
        let kept = history(h).unwrap().as_slice().len();
        assert!(kept < 40 && kept > 25, "kept {kept}");
        assert_eq!(
            error_text(h).map(str::len),
            Some(4_096),
            "the error is whole"
        );
        assert!(h.inner().contains_key(headers::ORIGINAL_QUEUE));
    }

    #[test]
    fn stripping_drops_the_users_largest_headers_and_keeps_the_frameworks() {
        let mut table = FieldTable::default();
        table.insert(
            "blob".into(),
            AMQPValue::LongString("b".repeat(131_000).into()),
        );
        table.insert("small".into(), AMQPValue::LongString("s".into()));
        table.insert(
            headers::FIRST_FAILED_AT.into(),
            AMQPValue::LongString("2026-01-01T00:00:00.000Z".into()),
        );
        table.insert(
            headers::ERROR.into(),
            AMQPValue::LongString("e".repeat(2_000).into()),
        );
        let properties = BasicProperties::default().with_headers(table);
        let (stripped, dropped) = without_largest_headers(properties, 131_064).expect("fits");
        assert_eq!(dropped, ["blob (131010 bytes)"]);
        let h = stripped.headers().as_ref().unwrap();
        for kept in [
            "small",
            headers::FIRST_FAILED_AT,
            headers::ERROR,
            headers::DROPPED_HEADERS,
        ] {
            assert!(h.inner().contains_key(kept), "{kept} kept");
        }
        assert!(content_header_len(&stripped) <= 131_064);
    }

    #[test]
    fn user_headers_too_large_are_refused() {
        let mut table = FieldTable::default();
        table.insert(
            "big".into(),
            AMQPValue::LongString("b".repeat(131_000).into()),
        );
        table.insert(
            headers::ERROR.into(),
            AMQPValue::LongString("x".repeat(1_000).into()),
        );
        let properties = BasicProperties::default().with_headers(table);
        let too_large = fit_to_frame(properties, 131_064).unwrap_err();
        assert_eq!(too_large.limit, 131_064);
        assert!(too_large.size > 131_064);
    }
}
