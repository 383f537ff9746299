//! [`DeadLetterFilter`]: which dead letters an operation (list, replay,
//! purge, export) applies to.

use std::collections::BTreeSet;
use std::time::SystemTime;

use regex::Regex;
use regex::bytes::{Regex as BytesRegex, RegexBuilder};

use crate::message::DeadLetterMessage;

/// Which dead letters an operation applies to. Every criterion set must hold;
/// an empty filter matches everything.
///
/// ```
/// use rabbit_backoff::dead_letters::DeadLetterFilter;
///
/// let filter = DeadLetterFilter::default()
///     .error("timeout|unavailable")?
///     .min_count(3)
///     .text("tenant-42")
///     .limit(100);
/// # Ok::<(), regex::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DeadLetterFilter {
    /// `x-error` matches this pattern.
    pub error: Option<Regex>,
    /// `x-retry-count` is at least this.
    pub min_count: Option<u32>,
    /// `x-original-routing-key` is exactly this.
    pub routing_key: Option<String>,
    /// `x-failed-at` is before this instant (read by
    /// [`parse_failed_at`](rabbit_backoff_core::parse_failed_at): the framework's own
    /// timestamps and those of hand-written consumers, such as JavaScript's
    /// `toISOString()`; a message without a readable one does not match).
    pub before: Option<SystemTime>,
    /// `x-failed-at` is after this instant.
    pub after: Option<SystemTime>,
    /// In this dead-letter group ([`DeadLetterMessage::group`]).
    pub group: Option<String>,
    /// With this `message_id` property.
    pub message_id: Option<String>,
    /// With one of these `message_id` properties.
    pub message_ids: Option<BTreeSet<String>>,
    /// Found in the error, a header's name or value, the `message_id`, the
    /// `correlation_id` or the body ([`text`](Self::text) builds it: the
    /// text itself, case-insensitive).
    pub text: Option<BytesRegex>,
    /// At most this many messages.
    pub limit: Option<usize>,
}

impl DeadLetterFilter {
    /// Only messages whose `x-error` matches `pattern`.
    pub fn error(mut self, pattern: &str) -> Result<Self, regex::Error> {
        self.error = Some(Regex::new(pattern)?);
        Ok(self)
    }

    /// Only messages that went through at least `count` retry tiers.
    pub fn min_count(mut self, count: u32) -> Self {
        self.min_count = Some(count);
        self
    }

    /// Only messages that failed with this routing key.
    pub fn routing_key(mut self, key: impl Into<String>) -> Self {
        self.routing_key = Some(key.into());
        self
    }

    /// Only messages that failed before `instant`.
    pub fn before(mut self, instant: SystemTime) -> Self {
        self.before = Some(instant);
        self
    }

    /// Only messages that failed after `instant`.
    pub fn after(mut self, instant: SystemTime) -> Self {
        self.after = Some(instant);
        self
    }

    /// Only messages of this dead-letter group, as
    /// [`Dlq::groups`](crate::Dlq::groups) lists them.
    pub fn group(mut self, id: impl Into<String>) -> Self {
        self.group = Some(id.into());
        self
    }

    /// Only messages with this `message_id`.
    pub fn message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// Only messages with one of these `message_id`s.
    pub fn message_ids(mut self, ids: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.message_ids = Some(ids.into_iter().map(Into::into).collect());
        self
    }

    /// Only messages where `text` is found, ignoring case: in `x-error`, in
    /// another header's name or value, in the `message_id` or
    /// `correlation_id`, or anywhere in the body. Blank text selects
    /// everything.
    pub fn text(mut self, text: &str) -> Self {
        self.text = (!text.is_empty()).then(|| {
            RegexBuilder::new(&regex::escape(text))
                .case_insensitive(true)
                .build()
                .expect("an escaped literal is a valid pattern")
        });
        self
    }

    /// At most `limit` messages.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Whether the filter looks at more of a message than its group (the
    /// limit aside): a checkpoint of the dead-letter index, which keeps
    /// groups and not messages, cannot answer it.
    pub(crate) fn needs_messages(&self) -> bool {
        // Every field named, so that a new criterion is not forgotten here.
        let DeadLetterFilter {
            error,
            min_count,
            routing_key,
            before,
            after,
            group: _,
            message_id,
            message_ids,
            text,
            limit: _,
        } = self;
        error.is_some()
            || min_count.is_some()
            || routing_key.is_some()
            || before.is_some()
            || after.is_some()
            || message_id.is_some()
            || message_ids.is_some()
            || text.is_some()
    }

    /// Whether `message` meets every criterion (the limit aside); the text is
    /// looked for in the start of the body that its summary holds. A pass
    /// over the queue uses [`matches_with_body`](Self::matches_with_body).
    pub fn matches(&self, message: &DeadLetterMessage) -> bool {
        self.matches_with_body(message, message.body_preview.as_bytes())
    }

    /// Whether `message`, whose whole body is `body`, meets every criterion
    /// (the limit aside).
    pub fn matches_with_body(&self, message: &DeadLetterMessage, body: &[u8]) -> bool {
        if let Some(text) = &self.text
            && !text_found(text, message, body)
        {
            return false;
        }
        if self.message_ids.as_ref().is_some_and(|ids| {
            !message
                .message_id
                .as_ref()
                .is_some_and(|id| ids.contains(id))
        }) {
            return false;
        }
        if self.group.as_ref().is_some_and(|id| *id != message.group)
            || self
                .message_id
                .as_ref()
                .is_some_and(|id| message.message_id.as_ref() != Some(id))
        {
            return false;
        }
        if let Some(pattern) = &self.error
            && !message
                .error
                .as_deref()
                .is_some_and(|e| pattern.is_match(e))
        {
            return false;
        }
        if let Some(min) = self.min_count
            && message.retry_count.unwrap_or(0) < min
        {
            return false;
        }
        if let Some(key) = &self.routing_key
            && message.routing_key.as_deref() != Some(key.as_str())
        {
            return false;
        }
        if self.before.is_some() || self.after.is_some() {
            let Some(failed_at) = message
                .failed_at
                .as_deref()
                .and_then(rabbit_backoff_core::parse_failed_at)
            else {
                return false;
            };
            if self.before.is_some_and(|before| failed_at >= before)
                || self.after.is_some_and(|after| failed_at <= after)
            {
                return false;
            }
        }
        true
    }
}

/// Whether `text` is found in the message's error, headers, ids or body.
fn text_found(text: &BytesRegex, message: &DeadLetterMessage, body: &[u8]) -> bool {
    let found = |s: &str| text.is_match(s.as_bytes());
    message.error.as_deref().is_some_and(found)
        || message.message_id.as_deref().is_some_and(found)
        || message.correlation_id.as_deref().is_some_and(found)
        || message
            .headers
            .iter()
            .any(|(name, value)| found(name) || found(value))
        || text.is_match(body)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    /// A dead letter as the article's hand-written loop writes it: no
    /// reason, no original queue, a JavaScript ISO timestamp.
    fn articles() -> DeadLetterMessage {
        DeadLetterMessage {
            position: 0,
            routing_key: None,
            original_queue: None,
            retry_count: Some(3),
            error: Some("database unavailable".into()),
            failed_at: Some("2026-12-02T10:40:07.121Z".into()),
            reason: None,
            message_id: Some("m-1".into()),
            correlation_id: None,
            headers: Default::default(),
            body_len: 2,
            body_preview: "{}".into(),
            redelivered: false,
            group: "0123456789ab".into(),
        }
    }

    #[test]
    fn filters_by_group_and_message_id() {
        let m = articles();
        assert!(
            DeadLetterFilter::default()
                .group("0123456789ab")
                .matches(&m)
        );
        assert!(
            !DeadLetterFilter::default()
                .group("ba9876543210")
                .matches(&m)
        );
        assert!(DeadLetterFilter::default().message_id("m-1").matches(&m));
        assert!(!DeadLetterFilter::default().message_id("m-2").matches(&m));
        let anonymous = DeadLetterMessage {
            message_id: None,
            ..articles()
        };
        assert!(
            !DeadLetterFilter::default()
                .message_id("m-1")
                .matches(&anonymous)
        );
    }

    #[test]
    fn filters_dead_letters_of_hand_written_consumers() {
        let failed_at = UNIX_EPOCH + Duration::from_millis(1_796_208_007_121);
        let m = articles();
        assert!(DeadLetterFilter::default().matches(&m));
        let second = Duration::from_secs(1);
        assert!(
            DeadLetterFilter::default()
                .after(failed_at - second)
                .matches(&m)
        );
        assert!(
            !DeadLetterFilter::default()
                .after(failed_at + second)
                .matches(&m)
        );
        assert!(
            DeadLetterFilter::default()
                .before(failed_at + second)
                .matches(&m)
        );
        assert!(
            !DeadLetterFilter::default()
                .before(failed_at - second)
                .matches(&m)
        );
        assert!(DeadLetterFilter::default().min_count(3).matches(&m));
        assert!(
            DeadLetterFilter::default()
                .error("unavailable")
                .unwrap()
                .matches(&m)
        );
        // An unreadable time matches no time filter, and nothing else breaks.
        let odd = DeadLetterMessage {
            failed_at: Some("Wed Dec 02 2026".into()),
            ..articles()
        };
        assert!(!DeadLetterFilter::default().after(UNIX_EPOCH).matches(&odd));
        assert!(DeadLetterFilter::default().min_count(1).matches(&odd));
    }

    #[test]
    fn finds_text_in_the_error_headers_ids_and_whole_body_ignoring_case() {
        let mut m = articles();
        m.headers.insert("tenant".into(), "Acme-42".into());
        let body = b"{\"order\": 17, \"note\": \"far past the preview: NEEDLE\"}";
        let found = |text: &str| {
            DeadLetterFilter::default()
                .text(text)
                .matches_with_body(&m, body)
        };
        assert!(found("DATABASE"), "the error");
        assert!(found("acme-42"), "a header's value");
        assert!(found("tenant"), "a header's name");
        assert!(found("m-1"), "the message id");
        assert!(found("needle"), "the whole body");
        assert!(!found("haystack"));
        assert!(found(""), "blank text selects everything");
        // Regex syntax is text like any other.
        assert!(!found("m.1"));
        assert!(
            !DeadLetterFilter::default().text("needle").matches(&m),
            "a summary's preview holds no such text"
        );
    }

    #[test]
    fn filters_by_several_message_ids() {
        let m = articles();
        assert!(
            DeadLetterFilter::default()
                .message_ids(["m-0", "m-1"])
                .matches(&m)
        );
        assert!(
            !DeadLetterFilter::default()
                .message_ids(["m-0", "m-2"])
                .matches(&m)
        );
        let empty: [&str; 0] = [];
        assert!(!DeadLetterFilter::default().message_ids(empty).matches(&m));
    }
}
