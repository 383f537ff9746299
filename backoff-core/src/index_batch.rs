//! Many entries of the dead-letter index in one stream message.

use crate::index_entry::{ENTRY_HEADERS, EntryValue, IndexEntry};

/// The entries of the dead-letter index that one stream message holds: the
/// writers (the consumer's, the operator tools') collect entries and
/// publish them together, so that the broker stores one small message for
/// many dead letters instead of a second copy of each.
///
/// The message says what it is by its content type,
/// [`CONTENT_TYPE`](Self::CONTENT_TYPE); a reader takes any other message of
/// the entries' stream for a whole dead letter, as an index written before
/// batches held them. Its body, [`encode`](Self::encode)d: a format octet
/// (1), the number of entries, then each entry: which of its fields are
/// there and of what kind, each field's bytes written as the length of the
/// start it shares with the same field of the entry before and the rest
/// (so that a queue name, a reason, the start of an error or of a time
/// written again costs a few bytes), the timestamp and the body's size.
/// Numbers are LEB128 varints.
///
/// ```
/// use rabbit_backoff_core::{EntryValue, IndexBatch, IndexEntry};
///
/// let mut batch = IndexBatch::default();
/// for id in 0..3 {
///     let mut entry = IndexEntry::default();
///     entry.message_id = Some(format!("order-{id}"));
///     entry.body_len = 1024;
///     entry.set_header("x-error", EntryValue::Text(format!("order {id} not found").into_bytes()));
///     batch.entries.push(entry);
/// }
/// let bytes = batch.encode();
/// assert!(bytes.len() < 90, "{} bytes", bytes.len());
/// assert_eq!(IndexBatch::decode(&bytes), Ok(batch));
/// assert!(IndexBatch::decode(b"\x01\xff").is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexBatch {
    /// The entries, in the order they were written.
    pub entries: Vec<IndexEntry>,
}

/// Why bytes are not an [`IndexBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The format octet is not one this version reads.
    #[error("format {0} of a batch of index entries is not one this version reads")]
    Format(u8),
    /// The bytes end before the batch does.
    #[error("a batch of index entries ends too soon")]
    Truncated,
    /// A number is longer than 64 bits, or a field says it shares more
    /// than the field before it held.
    #[error("a batch of index entries holds a number out of range")]
    OutOfRange,
    /// An id is not UTF-8.
    #[error("a batch of index entries holds an id that is not UTF-8")]
    NotUtf8,
    /// Bytes follow the last entry.
    #[error("a batch of index entries has bytes after its last entry")]
    Trailing,
}

/// The format octet this version writes.
const FORMAT: u8 = 1;

/// The fields written as bytes, in order: the two ids, then the headers.
pub(crate) const FIELDS: usize = 2 + ENTRY_HEADERS.len();

/// The kind of a field in an entry's mask (two bits a field).
pub(crate) const ABSENT: u64 = 0;
pub(crate) const TEXT: u64 = 1;
pub(crate) const ENCODED: u64 = 2;

/// The mask's bit saying that the timestamp is there.
const TIMESTAMP: u64 = 1 << (2 * FIELDS);

impl IndexBatch {
    /// The content type of a stream message holding a batch.
    pub const CONTENT_TYPE: &'static str = "application/x-rabbit-backoff-index-batch";

    /// The body of a stream message holding these entries.
    pub fn encode(&self) -> Vec<u8> {
        let mut batch = BatchEncoder::new(self.entries.len());
        for entry in &self.entries {
            batch.push(fields_of(entry), entry.timestamp, entry.body_len);
        }
        batch.finish()
    }

    /// The batch `bytes` hold (the body of a message with
    /// [`CONTENT_TYPE`](Self::CONTENT_TYPE)); any bytes at all give a batch
    /// or an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Self, BatchError> {
        let mut input = Input { bytes, at: 0 };
        let format = input.byte()?;
        if format != FORMAT {
            return Err(BatchError::Format(format));
        }
        let count = input.varint()?;
        // At least two bytes an entry: never more room than the bytes allow.
        let mut entries = Vec::with_capacity((count as usize).min(bytes.len() / 2));
        let mut before: [Vec<u8>; FIELDS] = Default::default();
        for _ in 0..count {
            let mask = input.varint()?;
            if mask >> (2 * FIELDS + 1) != 0 {
                return Err(BatchError::OutOfRange);
            }
            let mut entry = IndexEntry::default();
            for (i, kept) in before.iter_mut().enumerate() {
                let kind = (mask >> (2 * i)) & 0b11;
                if kind == ABSENT {
                    continue;
                }
                let shared =
                    usize::try_from(input.varint()?).map_err(|_| BatchError::OutOfRange)?;
                let rest = usize::try_from(input.varint()?).map_err(|_| BatchError::OutOfRange)?;
                if shared > kept.len() {
                    return Err(BatchError::OutOfRange);
                }
                kept.truncate(shared);
                kept.extend_from_slice(input.take(rest)?);
                set_field(&mut entry, i, kind, kept.clone())?;
            }
            if mask & TIMESTAMP != 0 {
                entry.timestamp = Some(input.varint()?);
            }
            entry.body_len = input.varint()?;
            entries.push(entry);
        }
        if input.at != bytes.len() {
            return Err(BatchError::Trailing);
        }
        Ok(IndexBatch { entries })
    }
}

/// An entry's fields as the format writes them: each field's kind
/// ([`ABSENT`], [`TEXT`] or [`ENCODED`]) and its bytes.
pub(crate) type Fields<'a> = [(u64, Option<&'a [u8]>); FIELDS];

/// Writes a batch entry by entry: the one place the format is written, for
/// [`IndexBatch::encode`] and [`PackedEntry::encode_batch`](crate::PackedEntry::encode_batch).
pub(crate) struct BatchEncoder<'a> {
    out: Vec<u8>,
    /// Each field of the entry before, which the next shares a start with.
    before: [&'a [u8]; FIELDS],
}

impl<'a> BatchEncoder<'a> {
    /// A batch of `count` entries.
    pub(crate) fn new(count: usize) -> Self {
        let mut out = Vec::with_capacity(16 + 48 * count);
        out.push(FORMAT);
        put_varint(&mut out, count as u64);
        BatchEncoder {
            out,
            before: [&[]; FIELDS],
        }
    }

    /// Writes the next entry.
    pub(crate) fn push(&mut self, fields: Fields<'a>, timestamp: Option<u64>, body_len: u64) {
        let out = &mut self.out;
        let mut mask = timestamp.map_or(0, |_| TIMESTAMP);
        for (i, (kind, _)) in fields.iter().enumerate() {
            mask |= kind << (2 * i);
        }
        put_varint(out, mask);
        for (i, (_, bytes)) in fields.iter().enumerate() {
            let Some(bytes) = *bytes else { continue };
            let shared = shared_start(bytes, self.before[i]);
            put_varint(out, shared as u64);
            put_varint(out, (bytes.len() - shared) as u64);
            out.extend_from_slice(&bytes[shared..]);
            self.before[i] = bytes;
        }
        if let Some(at) = timestamp {
            put_varint(out, at);
        }
        put_varint(out, body_len);
    }

    /// The batch's bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.out
    }
}

/// The fields of `entry` written as bytes, in order, each with its kind.
fn fields_of(entry: &IndexEntry) -> Fields<'_> {
    let mut fields = [(ABSENT, None); FIELDS];
    for (field, id) in fields
        .iter_mut()
        .zip([&entry.message_id, &entry.correlation_id])
    {
        if let Some(id) = id {
            *field = (TEXT, Some(id.as_bytes()));
        }
    }
    for (field, value) in fields[2..].iter_mut().zip(&entry.headers) {
        *field = match value {
            Some(EntryValue::Text(bytes)) => (TEXT, Some(bytes.as_slice())),
            Some(EntryValue::Encoded(bytes)) => (ENCODED, Some(bytes.as_slice())),
            None => (ABSENT, None),
        };
    }
    fields
}

/// Sets field `at` of `entry` (an id, then the headers of
/// [`ENTRY_HEADERS`]) to `value` of `kind`: the one place a field's place
/// and kind say what it is, for [`IndexBatch::decode`] and
/// [`PackedEntry::to_entry`](crate::PackedEntry::to_entry).
pub(crate) fn set_field(
    entry: &mut IndexEntry,
    at: usize,
    kind: u64,
    value: Vec<u8>,
) -> Result<(), BatchError> {
    match (at, kind) {
        (0 | 1, TEXT) => {
            let id = String::from_utf8(value).map_err(|_| BatchError::NotUtf8)?;
            *if at == 0 {
                &mut entry.message_id
            } else {
                &mut entry.correlation_id
            } = Some(id);
        }
        (2..FIELDS, TEXT) => entry.headers[at - 2] = Some(EntryValue::Text(value)),
        (2..FIELDS, ENCODED) => entry.headers[at - 2] = Some(EntryValue::Encoded(value)),
        _ => return Err(BatchError::OutOfRange),
    }
    Ok(())
}

/// How many bytes `a` and `b` start with in common: eight at a time, then
/// one at a time (an entry's error and time share most of their start with
/// the entry's before).
fn shared_start(a: &[u8], b: &[u8]) -> usize {
    let whole = a
        .chunks_exact(8)
        .zip(b.chunks_exact(8))
        .take_while(|(a, b)| a == b)
        .count()
        * 8;
    whole
        + a[whole..]
            .iter()
            .zip(&b[whole..])
            .take_while(|(a, b)| a == b)
            .count()
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The bytes of a batch, read from the front.
struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Input<'a> {
    fn byte(&mut self) -> Result<u8, BatchError> {
        let byte = *self.bytes.get(self.at).ok_or(BatchError::Truncated)?;
        self.at += 1;
        Ok(byte)
    }

    fn varint(&mut self) -> Result<u64, BatchError> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(BatchError::OutOfRange);
            }
            n |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(BatchError::OutOfRange)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], BatchError> {
        let end = self.at.checked_add(n).ok_or(BatchError::Truncated)?;
        let taken = self.bytes.get(self.at..end).ok_or(BatchError::Truncated)?;
        self.at = end;
        Ok(taken)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Option<EntryValue>> {
        prop_oneof![
            Just(None),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(|b| Some(EntryValue::Text(b))),
            proptest::collection::vec(any::<u8>(), 0..40)
                .prop_map(|b| Some(EntryValue::Encoded(b))),
        ]
    }

    /// Any entry, with any of its fields there or not.
    pub(crate) fn entry() -> impl Strategy<Value = IndexEntry> {
        (
            proptest::option::of("[a-z0-9é-]{0,12}"),
            proptest::option::of(".{0,8}"),
            proptest::option::of(any::<u64>()),
            any::<u64>(),
            proptest::array::uniform7(value()),
        )
            .prop_map(
                |(message_id, correlation_id, timestamp, body_len, headers)| IndexEntry {
                    message_id,
                    correlation_id,
                    timestamp,
                    body_len,
                    headers,
                },
            )
    }

    proptest! {
        #[test]
        fn a_batch_reads_back_as_written(entries in proptest::collection::vec(entry(), 0..20)) {
            let batch = IndexBatch { entries };
            prop_assert_eq!(IndexBatch::decode(&batch.encode()), Ok(batch));
        }

        #[test]
        fn any_bytes_decode_or_fail_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = IndexBatch::decode(&bytes);
            let mut batch = vec![FORMAT];
            batch.extend_from_slice(&bytes);
            let _ = IndexBatch::decode(&batch);
        }

        #[test]
        fn a_cut_batch_is_an_error(entries in proptest::collection::vec(entry(), 1..5), cut in 1usize..1000) {
            let bytes = IndexBatch { entries }.encode();
            let cut = cut % bytes.len();
            prop_assert!(IndexBatch::decode(&bytes[..cut]).is_err());
        }
    }

    proptest! {
        #[test]
        fn the_shared_start_is_the_common_prefix(
            a in proptest::collection::vec(0u8..3, 0..40),
            b in proptest::collection::vec(0u8..3, 0..40),
        ) {
            let naive = a.iter().zip(&b).take_while(|(a, b)| a == b).count();
            prop_assert_eq!(shared_start(&a, &b), naive);
            let mut longer = a.clone();
            longer.extend_from_slice(&b);
            prop_assert_eq!(shared_start(&longer, &a), a.len());
        }
    }

    #[test]
    fn numbers_past_64_bits_and_odd_masks_are_refused() {
        let mut long = vec![FORMAT];
        long.extend_from_slice(&[0xff; 10]);
        long.push(0x01);
        assert_eq!(IndexBatch::decode(&long), Err(BatchError::OutOfRange));
        // A message id said to be "encoded": no such kind for an id.
        assert_eq!(
            IndexBatch::decode(&[FORMAT, 1, ENCODED as u8, 0, 0, 0]),
            Err(BatchError::OutOfRange)
        );
        assert_eq!(IndexBatch::decode(&[2]), Err(BatchError::Format(2)));
        assert_eq!(
            IndexBatch::decode(&[FORMAT, 0, 0]),
            Err(BatchError::Trailing)
        );
    }

    /// A consumer's dead letters, one after another: what they cost a
    /// batch, against a copy of each (about a kilobyte of body and
    /// headers).
    #[test]
    fn an_entry_of_a_flood_takes_tens_of_bytes() {
        let entries: Vec<IndexEntry> = (0..256u64)
            .map(|i| {
                let mut entry = IndexEntry {
                    message_id: Some(format!("6f1c2e0a-93b4-4f1e-9a7d-2b1e0c9d{i:04x}")),
                    body_len: 1024,
                    ..IndexEntry::default()
                };
                let text = |s: String| EntryValue::Text(s.into_bytes());
                entry.set_header("x-error", text(format!("order {i} not found")));
                entry.set_header(
                    "x-failed-at",
                    text(format!(
                        "2026-12-02T10:40:{:02}.{:03}Z",
                        i / 100,
                        i * 7 % 1000
                    )),
                );
                entry.set_header("x-dead-letter-reason", text("permanent".into()));
                entry.set_header("x-original-queue", text("orders".into()));
                entry
            })
            .collect();
        let bytes = IndexBatch { entries }.encode();
        let per_entry = bytes.len() / 256;
        assert!(per_entry <= 40, "{per_entry} bytes an entry");
    }
}
