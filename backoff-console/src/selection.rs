//! What a read or a write applies to: a search (text, failed-at range,
//! group), and for writes one message, a group, several messages or every
//! message a search matches.

use rabbit_backoff_core::parse_failed_at;
use rabbit_backoff_dead_letters::DeadLetterFilter;
use serde::{Deserialize, Serialize};

/// The most messages one selection may name.
pub(crate) const MAX_SELECTED: usize = 10_000;

/// A search over a dead-letter queue; every field set must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Search {
    /// Found in the error, a header, the ids or the body (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) text: Option<String>,
    /// Failed after this instant (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) failed_after: Option<String>,
    /// Failed before this instant (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) failed_before: Option<String>,
    /// In this dead-letter group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) group: Option<String>,
}

impl Search {
    /// The search without its group: what the groups and the chart count.
    pub(crate) fn without_group(&self) -> Search {
        Search {
            group: None,
            ..self.clone()
        }
    }

    /// The filter that finds these messages.
    pub(crate) fn filter(&self) -> Result<DeadLetterFilter, String> {
        let mut filter = DeadLetterFilter::default();
        if let Some(text) = self
            .text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            filter = filter.text(text);
        }
        if let Some(after) = nonblank(&self.failed_after) {
            filter = filter.after(instant("failed_after", after)?);
        }
        if let Some(before) = nonblank(&self.failed_before) {
            filter = filter.before(instant("failed_before", before)?);
        }
        if let Some(group) = nonblank(&self.group) {
            filter = filter.group(group);
        }
        Ok(filter)
    }
}

fn nonblank(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn instant(field: &str, value: &str) -> Result<std::time::SystemTime, String> {
    parse_failed_at(value).ok_or_else(|| {
        format!("{field}: `{value}` is not an RFC 3339 time such as 2026-12-02T10:40:07Z")
    })
}

/// The body of a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Selection {
    /// Every message of the dead-letter group with this id.
    Group(String),
    /// The first message with this `message_id`, and only that one.
    MessageId(String),
    /// The messages with these `message_id`s.
    MessageIds(Vec<String>),
    /// Every message the search matches.
    Matching(Search),
}

impl Selection {
    /// The filter that selects exactly these messages.
    pub(crate) fn filter(&self) -> Result<DeadLetterFilter, String> {
        Ok(match self {
            Selection::Group(id) => DeadLetterFilter::default().group(id.clone()),
            Selection::MessageId(id) => one_message(id),
            Selection::MessageIds(ids) => {
                if ids.is_empty() {
                    return Err("message_ids is empty: select at least one message".into());
                }
                if ids.len() > MAX_SELECTED {
                    return Err(format!(
                        "{} messages selected, more than {MAX_SELECTED}: select all that match a search instead",
                        ids.len()
                    ));
                }
                DeadLetterFilter::default().message_ids(ids.iter().cloned())
            }
            Selection::Matching(search) => search.filter()?,
        })
    }
}

/// The first message with this `message_id`, and only that one.
pub(crate) fn one_message(message_id: &str) -> DeadLetterFilter {
    DeadLetterFilter::default()
        .message_id(message_id.to_owned())
        .limit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_one_group_or_one_message() {
        let group: Selection = serde_json::from_str(r#"{"group":"0123456789ab"}"#).unwrap();
        assert_eq!(group, Selection::Group("0123456789ab".into()));
        assert_eq!(
            group.filter().unwrap().group.as_deref(),
            Some("0123456789ab")
        );
        assert_eq!(group.filter().unwrap().limit, None);
        let one: Selection = serde_json::from_str(r#"{"message_id":"m-1"}"#).unwrap();
        assert_eq!(one.filter().unwrap().message_id.as_deref(), Some("m-1"));
        assert_eq!(one.filter().unwrap().limit, Some(1));
        assert!(serde_json::from_str::<Selection>(r#"{}"#).is_err());
        assert!(serde_json::from_str::<Selection>(r#"{"group":"a","message_id":"b"}"#).is_err());
    }

    #[test]
    fn reads_several_messages_or_a_search() {
        let many: Selection = serde_json::from_str(r#"{"message_ids":["a","b"]}"#).unwrap();
        assert_eq!(many.filter().unwrap().message_ids.unwrap().len(), 2);
        assert!(Selection::MessageIds(vec![]).filter().is_err());
        let search: Selection = serde_json::from_str(
            r#"{"matching":{"text":"Tenant","failed_after":"2026-12-02T10:00:00.000Z","group":"g"}}"#,
        )
        .unwrap();
        let filter = search.filter().unwrap();
        assert!(filter.text.unwrap().is_match(b"tenant"));
        assert!(filter.after.is_some() && filter.before.is_none());
        assert_eq!(filter.group.as_deref(), Some("g"));
        let bad = Search {
            failed_before: Some("yesterday".into()),
            ..Search::default()
        };
        assert!(bad.filter().unwrap_err().contains("failed_before"));
        assert!(serde_json::from_str::<Search>(r#"{"txt":"x"}"#).is_err());
    }
}
