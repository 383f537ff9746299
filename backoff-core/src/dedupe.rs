//! Dropping duplicate deliveries: which key identifies a message, how long a
//! handled key is remembered, and what each decision does to the key.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Decision;

/// Where a delivery's dedupe key comes from.
///
/// ```
/// use rabbit_backoff::DedupeKey;
///
/// assert_eq!("message_id".parse(), Ok(DedupeKey::MessageId));
/// let header: DedupeKey = "header:x-idempotency-key".parse()?;
/// assert_eq!(header, DedupeKey::Header("x-idempotency-key".into()));
/// assert_eq!(header.to_string(), "header:x-idempotency-key");
/// assert!("idempotency".parse::<DedupeKey>().is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DedupeKey {
    /// The `message_id` property (the default).
    #[default]
    MessageId,
    /// A header whose value is a string or an integer.
    Header(String),
}

impl fmt::Display for DedupeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DedupeKey::MessageId => f.write_str("message_id"),
            DedupeKey::Header(name) => write!(f, "header:{name}"),
        }
    }
}

impl FromStr for DedupeKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "message_id" {
            return Ok(DedupeKey::MessageId);
        }
        match s.strip_prefix("header:") {
            Some("") => {
                Err("`header:` names no header; write e.g. \"header:x-idempotency-key\"".to_owned())
            }
            Some(name) if name.len() > 255 => Err(format!(
                "the header name is {} bytes long; AMQP allows at most 255",
                name.len()
            )),
            Some(name) => Ok(DedupeKey::Header(name.to_owned())),
            None => Err(format!(
                "`{s}` is not a dedupe key; write \"message_id\" (the default) or \"header:<name>\", e.g. \"header:x-idempotency-key\""
            )),
        }
    }
}

/// A consumer's inbox: deliveries whose key completed within `window` are
/// acknowledged without running the handler (`dedupe = "24h"`).
///
/// ```
/// use std::time::Duration;
/// use rabbit_backoff::{Dedupe, DedupeKey};
///
/// let dedupe = Dedupe::new(Duration::from_secs(86_400))
///     .with_key("header:x-idempotency-key".parse()?);
/// assert_eq!(dedupe.key, DedupeKey::Header("x-idempotency-key".into()));
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Dedupe {
    /// How long a completed key is remembered.
    pub window: Duration,
    /// Where the key comes from.
    pub key: DedupeKey,
}

impl Dedupe {
    /// An inbox keyed by `message_id`, remembering keys for `window`.
    pub fn new(window: Duration) -> Self {
        Dedupe {
            window,
            key: DedupeKey::MessageId,
        }
    }

    /// The same inbox keyed by `key`.
    pub fn with_key(mut self, key: DedupeKey) -> Self {
        self.key = key;
        self
    }
}

/// The inbox key of a delivery: its dedupe key, and after a replay from the
/// dead-letter queue (`x-replay-count`) the number of that replay, so that a
/// replayed dead letter is handled again while its own duplicates are not.
///
/// ```
/// use rabbit_backoff::rules::inbox_key;
///
/// assert_eq!(inbox_key("order-7", 0), "order-7");
/// assert_eq!(inbox_key("order-7", 2), "order-7#replay-2");
/// ```
pub fn inbox_key(key: &str, replays: u32) -> Cow<'_, str> {
    if replays == 0 {
        Cow::Borrowed(key)
    } else {
        Cow::Owned(format!("{key}#replay-{replays}"))
    }
}

/// The message id of the `position`-th message (from 1) that the handler of
/// the delivery with inbox key `key` published through the outbox: the same
/// on every run of that delivery, so that the receiver's inbox drops a copy
/// published twice.
///
/// ```
/// use rabbit_backoff::rules::outbox_message_id;
/// assert_eq!(outbox_message_id("order-7", 1), "order-7/1");
/// ```
pub fn outbox_message_id(key: &str, position: u32) -> String {
    format!("{key}/{position}")
}

/// What settling a delivery does to its inbox key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyFate {
    /// The message is done with (handled, dead-lettered or discarded): a
    /// duplicate within the window is acknowledged without the handler.
    Complete,
    /// It will come back from a retry tier: the key is free for that retry.
    Release,
}

impl KeyFate {
    /// The fate of a delivery's key under `decision`.
    ///
    /// ```
    /// use rabbit_backoff::rules::{DeadLetterReason, Decision, KeyFate};
    ///
    /// assert_eq!(KeyFate::of(&Decision::Ack), KeyFate::Complete);
    /// assert_eq!(
    ///     KeyFate::of(&Decision::DeadLetter { reason: DeadLetterReason::Exhausted }),
    ///     KeyFate::Complete
    /// );
    /// assert_eq!(KeyFate::of(&Decision::Retry { delay_ms: 1_000, next_count: 1 }), KeyFate::Release);
    /// ```
    pub fn of(decision: &Decision) -> KeyFate {
        match decision {
            Decision::Ack | Decision::Discard | Decision::DeadLetter { .. } => KeyFate::Complete,
            Decision::Retry { .. } | Decision::Redeliver { .. } | Decision::Hold { .. } => {
                KeyFate::Release
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_print() {
        for key in [
            DedupeKey::MessageId,
            DedupeKey::Header("x-idempotency-key".into()),
        ] {
            assert_eq!(key.to_string().parse::<DedupeKey>(), Ok(key));
        }
        assert!(
            "header:"
                .parse::<DedupeKey>()
                .unwrap_err()
                .contains("names no header")
        );
        let long = format!("header:{}", "h".repeat(256));
        assert!(long.parse::<DedupeKey>().unwrap_err().contains("255"));
        assert!(
            "messageid"
                .parse::<DedupeKey>()
                .unwrap_err()
                .contains("header:<name>")
        );
    }

    #[test]
    fn a_replay_gets_a_key_of_its_own() {
        assert_eq!(inbox_key("k", 0), "k");
        assert_ne!(inbox_key("k", 1), inbox_key("k", 2));
        assert_ne!(inbox_key("k", 1), "k");
    }
}
