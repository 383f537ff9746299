//! What a replay or a discard applies to: one message or one group.

use rabbit_backoff::DeadLetterFilter;
use serde::Deserialize;

/// The body of a write: `{"group": "<id>"}` or `{"message_id": "<id>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Selection {
    /// Every message of the dead-letter group with this id.
    Group(String),
    /// The first message with this `message_id`, and only that one.
    MessageId(String),
}

impl Selection {
    /// The filter that selects exactly these messages.
    pub fn filter(&self) -> DeadLetterFilter {
        match self {
            Selection::Group(id) => DeadLetterFilter::default().group(id.clone()),
            Selection::MessageId(id) => DeadLetterFilter::default().message_id(id.clone()).limit(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_one_group_or_one_message() {
        let group: Selection = serde_json::from_str(r#"{"group":"0123456789ab"}"#).unwrap();
        assert_eq!(group, Selection::Group("0123456789ab".into()));
        assert_eq!(group.filter().group.as_deref(), Some("0123456789ab"));
        assert_eq!(group.filter().limit, None);
        let one: Selection = serde_json::from_str(r#"{"message_id":"m-1"}"#).unwrap();
        assert_eq!(one.filter().message_id.as_deref(), Some("m-1"));
        assert_eq!(one.filter().limit, Some(1));
        assert!(serde_json::from_str::<Selection>(r#"{}"#).is_err());
        assert!(serde_json::from_str::<Selection>(r#"{"group":"a","message_id":"b"}"#).is_err());
    }
}
