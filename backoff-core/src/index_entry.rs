//! One dead letter in the dead-letter index: the summary its readers need,
//! not the message.

use crate::headers;

/// A header value an [`IndexEntry`] keeps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntryValue {
    /// A string (an AMQP long or short string, or a byte array: readers take
    /// them by meaning, whatever the type), as its bytes.
    Text(Vec<u8>),
    /// Any other AMQP 0-9-1 field value, as its encoding (the type octet,
    /// then the value), which the runtime writes and the readers parse.
    Encoded(Vec<u8>),
}

/// The headers of a dead letter that an [`IndexEntry`] keeps, in the order
/// [`IndexEntry::headers`] holds them: those that grouping, the filters and
/// the index key read (`x-error`, `x-failed-at`, `x-dead-letter-reason`,
/// `x-original-queue`, `x-original-routing-key`, `x-retry-count`), and the
/// broker's `x-death`, which the key reads only for a dead letter without
/// `x-error` (one the broker made), so an entry keeps it only then.
pub const ENTRY_HEADERS: [&str; 7] = [
    headers::ERROR,
    headers::FAILED_AT,
    headers::DEAD_LETTER_REASON,
    headers::ORIGINAL_QUEUE,
    headers::ORIGINAL_ROUTING_KEY,
    headers::RETRY_COUNT,
    headers::DEATH,
];

/// Where `x-death` is in [`ENTRY_HEADERS`].
pub(crate) const DEATH: usize = 6;

/// One dead letter as the dead-letter index records it: what `dlq groups`,
/// the console, a checkpoint and the tombstones read of a message (its
/// ids, its timestamp, the failure headers of [`ENTRY_HEADERS`] and the
/// body's size), not its body or its other headers, which the dead-letter
/// queue holds. Many entries travel in one stream message, an
/// [`IndexBatch`](crate::IndexBatch).
///
/// A reader turns an entry back into the properties of the message it
/// stands for (less the headers it leaves out), so that the key, the group
/// and every filter but a text search read it as they read the message in
/// the queue.
///
/// ```
/// use rabbit_backoff_core::{EntryValue, IndexEntry};
///
/// let mut entry = IndexEntry::default();
/// entry.message_id = Some("order-17".into());
/// entry.set_header("x-error", EntryValue::Text(b"order 17 not found".to_vec()));
/// entry.set_header("x-death", EntryValue::Encoded(vec![b'A', 0, 0, 0, 0]));
/// // A dead letter of the framework's (it says why) keeps no `x-death`.
/// assert_eq!(entry.header("x-death"), None);
/// assert_eq!(entry.header("x-error"), Some(&EntryValue::Text(b"order 17 not found".to_vec())));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct IndexEntry {
    /// The `message_id` property.
    pub message_id: Option<String>,
    /// The `correlation_id` property.
    pub correlation_id: Option<String>,
    /// The `timestamp` property (seconds).
    pub timestamp: Option<u64>,
    /// The body's size in bytes.
    pub body_len: u64,
    /// The values of [`ENTRY_HEADERS`], in that order.
    pub headers: [Option<EntryValue>; ENTRY_HEADERS.len()],
}

impl IndexEntry {
    /// Keeps `value` for the header `name` when it is one of
    /// [`ENTRY_HEADERS`] (and, for `x-death`, when the entry has no
    /// `x-error`); any other header is left out.
    pub fn set_header(&mut self, name: &str, value: EntryValue) {
        if let Some(i) = ENTRY_HEADERS.iter().position(|h| *h == name) {
            self.headers[i] = Some(value);
        }
        if self.headers[0].is_some() {
            self.headers[DEATH] = None;
        }
    }

    /// The value kept for the header `name`.
    pub fn header(&self, name: &str) -> Option<&EntryValue> {
        let i = ENTRY_HEADERS.iter().position(|h| *h == name)?;
        self.headers[i].as_ref()
    }

    /// The headers kept, with their names.
    pub fn named_headers(&self) -> impl Iterator<Item = (&'static str, &EntryValue)> {
        ENTRY_HEADERS
            .iter()
            .zip(&self.headers)
            .filter_map(|(name, value)| Some((*name, value.as_ref()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_its_headers_and_death_only_without_an_error() {
        let mut entry = IndexEntry::default();
        entry.set_header("tenant", EntryValue::Text(b"acme".to_vec()));
        entry.set_header("x-death", EntryValue::Encoded(vec![b'V']));
        assert_eq!(entry.named_headers().count(), 1, "x-death, without x-error");
        entry.set_header("x-error", EntryValue::Text(b"db down".to_vec()));
        let names: Vec<_> = entry.named_headers().map(|(name, _)| name).collect();
        assert_eq!(names, ["x-error"]);
    }
}
