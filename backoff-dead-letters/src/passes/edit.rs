//! [`MessageEdit`]: changes made to a dead letter's headers or body before
//! it is replayed.

use std::collections::{BTreeMap, BTreeSet};

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use rabbit_backoff_core::{REPLAY_HISTORY, headers};

/// A change to a dead letter made as it is replayed: a new body, user
/// headers set or removed. The replayed copy carries the change; its
/// `x-replay-history` entry keeps what it replaced (`x-original-body`, and
/// `x-original-headers` with the headers' values before it), so nothing of
/// the original is lost.
///
/// ```
/// use rabbit_backoff::dead_letters::{MessageEdit, ReplayOptions};
///
/// let edit = MessageEdit::default()
///     .body(br#"{"order": 17, "sku": "A-1"}"#.to_vec())
///     .set_header("tenant", "acme")?
///     .remove_header("debug")?;
/// let options = ReplayOptions::default().edit(edit);
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageEdit {
    /// The new body, or `None` to keep it.
    pub body: Option<Vec<u8>>,
    /// User headers to set, as text.
    pub set_headers: BTreeMap<String, String>,
    /// User headers to remove.
    pub remove_headers: BTreeSet<String>,
}

impl MessageEdit {
    /// Replaces the body.
    pub fn body(mut self, body: Vec<u8>) -> Self {
        self.body = Some(body);
        self
    }

    /// Sets a user header to a text value; the framework's own headers
    /// cannot be edited.
    pub fn set_header(mut self, name: &str, value: &str) -> Result<Self, String> {
        editable(name)?;
        self.remove_headers.remove(name);
        self.set_headers.insert(name.to_owned(), value.to_owned());
        Ok(self)
    }

    /// Removes a user header; the framework's own headers cannot be edited.
    pub fn remove_header(mut self, name: &str) -> Result<Self, String> {
        editable(name)?;
        self.set_headers.remove(name);
        self.remove_headers.insert(name.to_owned());
        Ok(self)
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.body.is_none() && self.set_headers.is_empty() && self.remove_headers.is_empty()
    }

    /// The edited properties and body, and the history fields that keep what
    /// the edit replaced.
    pub(crate) fn apply(
        &self,
        properties: &BasicProperties,
        body: &[u8],
    ) -> (BasicProperties, Vec<u8>, Vec<(ShortString, AMQPValue)>) {
        let mut table = properties.headers().clone().unwrap_or_default();
        let mut replaced = FieldTable::default();
        for name in self.set_headers.keys().chain(&self.remove_headers) {
            if let Some(old) = table.inner().get(name.as_str()) {
                replaced.insert(ShortString::from(name.as_str()), old.clone());
            }
        }
        let mut edited = FieldTable::default();
        for (name, value) in table.inner() {
            if !self.remove_headers.contains(name.as_str())
                && !self.set_headers.contains_key(name.as_str())
            {
                edited.insert(name.clone(), value.clone());
            }
        }
        for (name, value) in &self.set_headers {
            edited.insert(
                ShortString::from(name.as_str()),
                AMQPValue::LongString(LongString::from(value.as_bytes())),
            );
        }
        table = edited;
        let mut history = Vec::new();
        let new_body = match &self.body {
            Some(new) => {
                history.push((
                    ShortString::from(headers::ORIGINAL_BODY),
                    AMQPValue::LongString(LongString::from(body)),
                ));
                new.clone()
            }
            None => body.to_vec(),
        };
        if !self.set_headers.is_empty() || !self.remove_headers.is_empty() {
            history.push((
                ShortString::from(headers::ORIGINAL_HEADERS),
                AMQPValue::FieldTable(replaced),
            ));
        }
        (properties.clone().with_headers(table), new_body, history)
    }
}

/// A header an edit may touch: not empty, at most 255 bytes (an AMQP short
/// string), and none of the framework's own.
fn editable(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 255 {
        return Err(format!(
            "a header name must have 1 to 255 bytes, not {}",
            name.len()
        ));
    }
    if headers::FRAMEWORK.contains(&name)
        || name == REPLAY_HISTORY
        || name == headers::PASS_SENTINEL
    {
        return Err(format!(
            "`{name}` is one of the framework's own headers and cannot be edited"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_it_replaces() {
        let mut table = FieldTable::default();
        table.insert("tenant".into(), AMQPValue::LongLongInt(7));
        table.insert("debug".into(), AMQPValue::Boolean(true));
        table.insert("kept".into(), AMQPValue::LongString("as is".into()));
        table.insert("x-error".into(), AMQPValue::LongString("boom".into()));
        let original = BasicProperties::default()
            .with_message_id("m".into())
            .with_headers(table);
        let edit = MessageEdit::default()
            .body(b"new".to_vec())
            .set_header("tenant", "acme")
            .unwrap()
            .remove_header("debug")
            .unwrap();
        let (properties, body, history) = edit.apply(&original, b"old");
        assert_eq!(body, b"new");
        let h = properties.headers().as_ref().unwrap().inner();
        assert_eq!(h.get("tenant"), Some(&AMQPValue::LongString("acme".into())));
        assert_eq!(h.get("debug"), None);
        assert_eq!(h.get("kept"), Some(&AMQPValue::LongString("as is".into())));
        assert_eq!(
            h.get("x-error"),
            Some(&AMQPValue::LongString("boom".into()))
        );
        assert_eq!(properties.message_id().as_ref().unwrap().as_str(), "m");
        assert_eq!(
            history[0],
            (
                ShortString::from("x-original-body"),
                AMQPValue::LongString("old".into())
            )
        );
        let AMQPValue::FieldTable(replaced) = &history[1].1 else {
            panic!("the replaced headers")
        };
        assert_eq!(
            replaced.inner().get("tenant"),
            Some(&AMQPValue::LongLongInt(7))
        );
        assert_eq!(
            replaced.inner().get("debug"),
            Some(&AMQPValue::Boolean(true))
        );
    }

    #[test]
    fn refuses_the_frameworks_headers() {
        for name in ["x-error", "x-retry-count", "x-replay-history", ""] {
            assert!(
                MessageEdit::default().set_header(name, "v").is_err(),
                "{name}"
            );
            assert!(
                MessageEdit::default().remove_header(name).is_err(),
                "{name}"
            );
        }
        assert!(MessageEdit::default().is_empty());
    }
}
