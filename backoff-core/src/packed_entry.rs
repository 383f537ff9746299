//! An entry of the dead-letter index in one buffer, made as a dead letter is
//! published.

use crate::index_batch::{ABSENT, BatchEncoder, ENCODED, FIELDS, Fields, TEXT, set_field};
use crate::index_entry::{DEATH, ENTRY_HEADERS, IndexEntry};

/// Where `x-error` (the first of [`ENTRY_HEADERS`]) and `x-death` are among
/// an entry's fields, after its two ids.
const ERROR_FIELD: usize = 2;
const DEATH_FIELD: usize = 2 + DEATH;

/// An entry of the dead-letter index ([`IndexEntry`]) in one buffer: what a
/// consumer makes of a dead letter as it publishes it and hands to its index
/// writer, with one allocation where an [`IndexEntry`] makes one a field
/// (the writer's hot path: every dead letter of a flood makes one).
/// [`encode_batch`](Self::encode_batch) writes many as one
/// [`IndexBatch`](crate::IndexBatch) message, the same bytes
/// [`IndexBatch::encode`](crate::IndexBatch::encode) writes for the same
/// entries.
///
/// Made field by field, in the order of the entry's fields (the ids, then
/// [`ENTRY_HEADERS`]); as [`IndexEntry::set_header`] does, `x-death` is left
/// out when `x-error` is there.
///
/// ```
/// use rabbit_backoff_core::{IndexBatch, PackedEntry};
///
/// let mut entry = PackedEntry::builder(Some(1_700_000_000), 1024);
/// entry.message_id("order-7");
/// entry.text("x-error", b"order 7 not found");
/// entry.encoded("x-retry-count", |out| out.extend_from_slice(b"{\"LongInt\":3}"));
/// let entry = entry.finish();
///
/// let bytes = PackedEntry::encode_batch(std::slice::from_ref(&entry));
/// let batch = IndexBatch::decode(&bytes).unwrap();
/// assert_eq!(batch.entries, [entry.to_entry()]);
/// assert_eq!(batch.entries[0].message_id.as_deref(), Some("order-7"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedEntry {
    /// The timestamp (a flag octet, then 8 octets), the body's size (8), then
    /// each field there: its place (1), its kind (1), its length (4) and its
    /// bytes; numbers little-endian.
    bytes: Vec<u8>,
}

/// Makes a [`PackedEntry`], field by field: see [`PackedEntry::builder`].
#[derive(Debug)]
pub struct PackedEntryBuilder {
    entry: PackedEntry,
    /// The place of the next field: a field before it comes too late.
    next: usize,
    error: bool,
}

impl PackedEntry {
    /// Starts the entry of a dead letter with this timestamp and a body of
    /// `body_len` octets.
    pub fn builder(timestamp: Option<u64>, body_len: u64) -> PackedEntryBuilder {
        let mut bytes = Vec::with_capacity(160);
        bytes.push(u8::from(timestamp.is_some()));
        bytes.extend_from_slice(&timestamp.unwrap_or(0).to_le_bytes());
        bytes.extend_from_slice(&body_len.to_le_bytes());
        PackedEntryBuilder {
            entry: PackedEntry { bytes },
            next: 0,
            error: false,
        }
    }

    /// The batch message ([`IndexBatch`](crate::IndexBatch)'s format) of
    /// `entries`, in their order.
    pub fn encode_batch(entries: &[PackedEntry]) -> Vec<u8> {
        let mut batch = BatchEncoder::new(entries.len());
        for entry in entries {
            let (timestamp, body_len, fields) = entry.fields();
            batch.push(fields, timestamp, body_len);
        }
        batch.finish()
    }

    /// The same entry as an [`IndexEntry`].
    pub fn to_entry(&self) -> IndexEntry {
        let (timestamp, body_len, fields) = self.fields();
        let mut entry = IndexEntry {
            timestamp,
            body_len,
            ..IndexEntry::default()
        };
        for (at, (kind, bytes)) in fields.into_iter().enumerate() {
            let Some(bytes) = bytes else { continue };
            set_field(&mut entry, at, kind, bytes.to_vec())
                .expect("a builder writes ids from text and headers in their places");
        }
        entry
    }

    /// The timestamp, the body's size and the fields, read from the buffer
    /// the builder wrote.
    fn fields(&self) -> (Option<u64>, u64, Fields<'_>) {
        let bytes = &self.bytes;
        let number =
            |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 octets"));
        let timestamp = (bytes[0] == 1).then(|| number(1));
        let body_len = number(9);
        let mut fields: Fields<'_> = [(ABSENT, None); FIELDS];
        let mut at = 17;
        while at < bytes.len() {
            let (place, kind) = (usize::from(bytes[at]), u64::from(bytes[at + 1]));
            let len = u32::from_le_bytes(bytes[at + 2..at + 6].try_into().expect("4 octets"));
            let start = at + 6;
            let end = start + len as usize;
            fields[place] = (kind, Some(&bytes[start..end]));
            at = end;
        }
        (timestamp, body_len, fields)
    }
}

impl PackedEntryBuilder {
    /// Sets the message id.
    pub fn message_id(&mut self, id: &str) -> &mut Self {
        self.field(0, TEXT, |out| out.extend_from_slice(id.as_bytes()))
    }

    /// Sets the correlation id.
    pub fn correlation_id(&mut self, id: &str) -> &mut Self {
        self.field(1, TEXT, |out| out.extend_from_slice(id.as_bytes()))
    }

    /// Sets header `name` to text (as [`EntryValue::Text`](crate::EntryValue::Text)); a name not in
    /// [`ENTRY_HEADERS`] is not kept.
    pub fn text(&mut self, name: &str, value: &[u8]) -> &mut Self {
        match header_place(name) {
            Some(place) => self.field(place, TEXT, |out| out.extend_from_slice(value)),
            None => self,
        }
    }

    /// Sets header `name` to the encoded value `write` appends to the
    /// buffer (as [`EntryValue::Encoded`](crate::EntryValue::Encoded)); a name not in
    /// [`ENTRY_HEADERS`] is not kept.
    pub fn encoded(&mut self, name: &str, write: impl FnOnce(&mut Vec<u8>)) -> &mut Self {
        match header_place(name) {
            Some(place) => self.field(place, ENCODED, write),
            None => self,
        }
    }

    /// The entry.
    pub fn finish(self) -> PackedEntry {
        self.entry
    }

    fn field(&mut self, place: usize, kind: u64, write: impl FnOnce(&mut Vec<u8>)) -> &mut Self {
        debug_assert!(
            place >= self.next,
            "an entry's fields are set in their order: {place} after {}",
            self.next
        );
        if place < self.next || (place == DEATH_FIELD && self.error) {
            return self;
        }
        self.next = place + 1;
        self.error |= place == ERROR_FIELD;
        let bytes = &mut self.entry.bytes;
        bytes.push(place as u8);
        bytes.push(kind as u8);
        let len_at = bytes.len();
        bytes.extend_from_slice(&[0; 4]);
        write(bytes);
        let len = u32::try_from(bytes.len() - len_at - 4).unwrap_or(u32::MAX);
        bytes[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        self
    }
}

/// The place among an entry's fields of header `name`.
fn header_place(name: &str) -> Option<usize> {
    ENTRY_HEADERS.iter().position(|h| *h == name).map(|i| i + 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EntryValue, IndexBatch};
    use proptest::prelude::*;

    /// Any entry, without `x-death` beside `x-error` (which it keeps
    /// only without).
    fn entry() -> impl Strategy<Value = IndexEntry> {
        crate::index_batch::tests::entry().prop_map(|mut entry| {
            if entry.headers[ERROR_FIELD - 2].is_some() {
                entry.headers[DEATH_FIELD - 2] = None;
            }
            entry
        })
    }

    fn packed(entry: &IndexEntry) -> PackedEntry {
        let mut packed = PackedEntry::builder(entry.timestamp, entry.body_len);
        if let Some(id) = &entry.message_id {
            packed.message_id(id);
        }
        if let Some(id) = &entry.correlation_id {
            packed.correlation_id(id);
        }
        for (name, value) in entry.named_headers() {
            match value {
                EntryValue::Text(bytes) => packed.text(name, bytes),
                EntryValue::Encoded(bytes) => {
                    packed.encoded(name, |out| out.extend_from_slice(bytes))
                }
            };
        }
        packed.finish()
    }

    proptest! {
        /// Packed entries make the bytes `IndexBatch::encode` makes of the
        /// same entries, and read back as those entries.
        #[test]
        fn packed_entries_encode_as_their_batch(entries in proptest::collection::vec(entry(), 0..20)) {
            let packed: Vec<_> = entries.iter().map(packed).collect();
            for (packed, entry) in packed.iter().zip(&entries) {
                prop_assert_eq!(&packed.to_entry(), entry);
            }
            let batch = IndexBatch { entries };
            prop_assert_eq!(PackedEntry::encode_batch(&packed), batch.encode());
        }
    }

    #[test]
    fn death_is_left_out_beside_an_error_and_unknown_headers_are_not_kept() {
        let mut entry = PackedEntry::builder(None, 3);
        entry.text("x-error", b"db down");
        entry.text("tenant", b"acme");
        entry.encoded("x-death", |out| out.push(b'V'));
        let entry = entry.finish().to_entry();
        let names: Vec<_> = entry.named_headers().map(|(name, _)| name).collect();
        assert_eq!(names, ["x-error"]);
        let mut entry = PackedEntry::builder(None, 3);
        entry.encoded("x-death", |out| out.push(b'V'));
        assert_eq!(entry.finish().to_entry().named_headers().count(), 1);
    }
}
