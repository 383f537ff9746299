//! Shrinking a copy to fit one frame by the core's plan
//! ([`rabbit_backoff_core::fit_copy`]).

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use rabbit_backoff_core::{CopySizes, Fit, ShrinkPlan, fit_copy, headers, truncate_error_to};

use crate::settle::encoded_size::{content_header_len, value_len};

/// A copy that cannot fit in one frame, whatever the framework shrinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// Its content header's size after shrinking.
    pub size: usize,
    /// The largest content header the connection's frame allows.
    pub limit: usize,
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
    let sizes = CopySizes::new(total)
        .with_history(
            history(&table)
                .map(|items| items.as_slice().iter().map(value_len).collect())
                .unwrap_or_default(),
        )
        .with_error(error_text(&table).map_or(0, str::len))
        .with_original(
            headers::ORIGINAL
                .iter()
                .filter_map(|name| {
                    table
                        .inner()
                        .get(*name)
                        .map(|v| 1 + name.len() + value_len(v))
                })
                .sum(),
        );
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
    use crate::settle::encoded_size::tests::encoded;

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
