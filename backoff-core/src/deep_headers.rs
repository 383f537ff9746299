//! Header tables nested too deeply for a recursive parser, measured and
//! folded into a flat form without recursion, and unfolded again.
//!
//! lapin's parser (amq-protocol) reads a field table recursively: one level
//! of Rust stack per level of nesting. A table nested 18 000 levels deep fits
//! in one frame of 131 072 bytes, RabbitMQ accepts and delivers it, and
//! parsing it overflows the 2 MiB stack of lapin's I/O thread, which aborts
//! the process (docs/upstream.md, "Headers nested too deep", has the
//! reproduction and the fix upstream). So the runtime's frame guard reads every content header
//! before lapin does: [`table_depth`] measures its headers, and headers that
//! nest deeper than [`MAX_HEADER_DEPTH`](crate::MAX_HEADER_DEPTH) are
//! replaced by a flat table of one header,
//! [`DEEP_HEADERS`](crate::headers::DEEP_HEADERS), whose value (a byte array)
//! is the original table [`pack`]ed. When that flat table goes back out on
//! the same connection (a dead-letter pass republishing a copy), the guard
//! [`unpack`]s it into the original table, byte for byte.
//!
//! The packed form is the table's encoded entries with one change: each
//! table and array, the headers table itself included, ends with a zero byte
//! instead of starting with its 4-byte length, and a table entry's type tag
//! comes before its name rather than after it (so that the zero byte, which
//! no type tag is, can end a table as well as an array). Every other byte is
//! the wire's own. Headers nested more than 64 levels hold at least 65
//! tables and arrays, so packing saves at least 195 bytes: the flat table,
//! name and lengths included, is always smaller than the headers it
//! replaces, and the frame carrying it stays within the negotiated frame
//! size. The original bytes as they are would not do: the flat table's own
//! name and lengths would make a frame that was full larger than the
//! negotiated size, and lapin closes the connection on such a frame.
//!
//! ```
//! use rabbit_backoff::rules::deep_headers::{pack, table_depth, unpack};
//!
//! // The entries of a table holding `{"a": {"b": true}}`, as on the wire.
//! let entries = [1, b'a', b'F', 0, 0, 0, 4, 1, b'b', b't', 1];
//! assert_eq!(table_depth(&entries)?, 2);
//! let packed = pack(&entries)?;
//! assert_eq!(packed, [b'F', 1, b'a', b't', 1, b'b', 1, 0, 0]);
//! let unpacked = unpack(&packed)?;
//! assert_eq!(unpacked.entries, entries);
//! assert_eq!(unpacked.depth, 2);
//! # Ok::<(), rabbit_backoff::rules::deep_headers::TableError>(())
//! ```

/// Ends a table or an array in the packed form: no type tag is zero.
const END: u8 = 0;

/// A field table that is not well formed, where lapin's parser would fail
/// too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// A value or a table's content runs past the end of what holds it.
    #[error("a value runs past the end of its table at byte {0}")]
    Truncated(usize),
    /// A type tag no AMQP field type has.
    #[error("unknown field type {tag:#04x} at byte {at}")]
    UnknownType {
        /// The tag.
        tag: u8,
        /// Where it is.
        at: usize,
    },
    /// A field name that is not UTF-8.
    #[error("the field name at byte {0} is not UTF-8")]
    Name(usize),
    /// A packed table followed by more bytes, or a table longer than a
    /// 4-byte length can say.
    #[error("{0} bytes follow the packed table")]
    Trailing(usize),
}

/// What [`unpack`] gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unpacked {
    /// The table's encoded entries, as on the wire (without the table's own
    /// 4-byte length).
    pub entries: Vec<u8>,
    /// How deeply it nests: a table of scalars is 1.
    pub depth: usize,
}

/// One entry of a packed table, for showing it: its name, how deeply its
/// value nests, and the value as on the wire (type tag first).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Entry {
    /// The header's name.
    pub name: String,
    /// Levels of tables and arrays in its value: 0 for a scalar.
    pub depth: usize,
    /// The encoded value, type tag included.
    pub value: Vec<u8>,
}

/// How deeply the table whose encoded entries are `entries` nests (a table
/// of scalars is 1), measured without recursion.
pub fn table_depth(entries: &[u8]) -> Result<usize, TableError> {
    walk(entries, 0, entries.len(), true, None)
}

/// The packed form of the table whose encoded entries are `entries` (see
/// the [module](self) documentation).
pub fn pack(entries: &[u8]) -> Result<Vec<u8>, TableError> {
    let mut out = Vec::with_capacity(entries.len() + 1);
    walk(entries, 0, entries.len(), true, Some(&mut out))?;
    Ok(out)
}

/// The encoded entries of the table `packed` holds, and its depth; an error
/// when `packed` is not the packed form of a well-formed table.
pub fn unpack(packed: &[u8]) -> Result<Unpacked, TableError> {
    let mut out = Vec::with_capacity(packed.len() + packed.len() / 2);
    // Open tables and arrays: where their length goes in `out` (none for
    // the headers table, whose length is not part of its entries), and
    // whether they are tables.
    let mut open: Vec<(Option<usize>, bool)> = vec![(None, true)];
    let mut depth = 1;
    let mut at = 0;
    while let Some(&(length_at, table)) = open.last() {
        let tag = byte(packed, at, packed.len())?;
        at += 1;
        if tag == END {
            open.pop();
            if let Some(length_at) = length_at {
                let len = u32::try_from(out.len() - length_at - 4)
                    .map_err(|_| TableError::Trailing(out.len()))?;
                out[length_at..length_at + 4].copy_from_slice(&len.to_be_bytes());
            }
            continue;
        }
        if table {
            let name_end = name(packed, at, packed.len())?;
            out.extend_from_slice(&packed[at..name_end]);
            at = name_end;
        }
        out.push(tag);
        match tag {
            b'F' | b'A' => {
                open.push((Some(out.len()), tag == b'F'));
                out.extend_from_slice(&[0; 4]);
                depth = depth.max(open.len());
            }
            _ => {
                let end = at + scalar_len(tag, packed, at, packed.len())?;
                out.extend_from_slice(&packed[at..end]);
                at = end;
            }
        }
    }
    if at != packed.len() {
        return Err(TableError::Trailing(packed.len() - at));
    }
    Ok(Unpacked {
        entries: out,
        depth,
    })
}

/// The entries of the table `packed` holds, each with its depth, for
/// showing the shallow ones and naming the deep ones.
pub fn entries(packed: &[u8]) -> Result<Vec<Entry>, TableError> {
    let Unpacked { entries, .. } = unpack(packed)?;
    let mut listed = Vec::new();
    let mut at = 0;
    while at < entries.len() {
        let name_end = name(&entries, at, entries.len())?;
        let name = String::from_utf8_lossy(&entries[at + 1..name_end]).into_owned();
        let (end, depth) = value(&entries, name_end, entries.len())?;
        listed.push(Entry {
            name,
            depth,
            value: entries[name_end..end].to_vec(),
        });
        at = end;
    }
    Ok(listed)
}

/// The end of the one value (type tag first) at `at`, and how deeply it
/// nests.
fn value(bytes: &[u8], at: usize, end: usize) -> Result<(usize, usize), TableError> {
    let tag = byte(bytes, at, end)?;
    match tag {
        b'F' | b'A' => {
            let inner = at + 5;
            let len = u32_at(bytes, at + 1, end)? as usize;
            let inner_end = inner
                .checked_add(len)
                .filter(|e| *e <= end)
                .ok_or(TableError::Truncated(at))?;
            let depth = walk(bytes, inner, inner_end, tag == b'F', None)?;
            Ok((inner_end, depth))
        }
        _ => Ok((at + 1 + scalar_len(tag, bytes, at + 1, end)?, 0)),
    }
}

/// Walks the content of a table (`table`) or an array from `start` to
/// `end`, without recursion; writes its packed form (ended) to `out` when
/// given. Returns its depth: 1 for one holding only scalars.
fn walk(
    bytes: &[u8],
    start: usize,
    end: usize,
    table: bool,
    mut out: Option<&mut Vec<u8>>,
) -> Result<usize, TableError> {
    // The table or array being read: where it ends, whether it is a table;
    // the ones around it, which it is nested in (no allocation for a flat
    // table).
    let (mut end, mut table) = (end, table);
    let mut around: Vec<(usize, bool)> = Vec::new();
    let mut depth = 1;
    let mut at = start;
    loop {
        if at == end {
            if let Some(out) = out.as_deref_mut() {
                out.push(END);
            }
            match around.pop() {
                Some(outer) => (end, table) = outer,
                None => return Ok(depth),
            }
            continue;
        }
        let name_at = at;
        if table {
            at = name(bytes, at, end)?;
        }
        let tag = byte(bytes, at, end)?;
        if let Some(out) = out.as_deref_mut() {
            out.push(tag);
            out.extend_from_slice(&bytes[name_at..at]);
        }
        at += 1;
        match tag {
            b'F' | b'A' => {
                let len = u32_at(bytes, at, end)? as usize;
                at += 4;
                let inner_end = at
                    .checked_add(len)
                    .filter(|e| *e <= end)
                    .ok_or(TableError::Truncated(at))?;
                around.push((end, table));
                (end, table) = (inner_end, tag == b'F');
                depth = depth.max(around.len() + 1);
            }
            _ => {
                let value_end = at + scalar_len(tag, bytes, at, end)?;
                if let Some(out) = out.as_deref_mut() {
                    out.extend_from_slice(&bytes[at..value_end]);
                }
                at = value_end;
            }
        }
    }
}

/// The end of the field name (a short string) at `at`, checked to be UTF-8
/// as lapin's parser requires.
fn name(bytes: &[u8], at: usize, end: usize) -> Result<usize, TableError> {
    let len = usize::from(byte(bytes, at, end)?);
    let name_end = at + 1 + len;
    if name_end > end {
        return Err(TableError::Truncated(at));
    }
    std::str::from_utf8(&bytes[at + 1..name_end]).map_err(|_| TableError::Name(at))?;
    Ok(name_end)
}

/// The length of the payload at `at` of a scalar of type `tag` (the tags
/// lapin's parser knows), checked to end by `end`.
fn scalar_len(tag: u8, bytes: &[u8], at: usize, end: usize) -> Result<usize, TableError> {
    let tag_at = at.saturating_sub(1);
    let len = match tag {
        b'V' => 0,
        b't' | b'b' | b'B' => 1,
        b's' | b'U' | b'u' => 2,
        b'I' | b'i' | b'f' => 4,
        b'D' => 5,
        b'L' | b'l' | b'd' | b'T' => 8,
        b'S' | b'x' => 4 + u32_at(bytes, at, end)? as usize,
        tag => return Err(TableError::UnknownType { tag, at: tag_at }),
    };
    if at + len > end {
        return Err(TableError::Truncated(tag_at));
    }
    Ok(len)
}

fn byte(bytes: &[u8], at: usize, end: usize) -> Result<u8, TableError> {
    if at < end {
        Ok(bytes[at])
    } else {
        Err(TableError::Truncated(at))
    }
}

fn u32_at(bytes: &[u8], at: usize, end: usize) -> Result<u32, TableError> {
    if at + 4 > end {
        return Err(TableError::Truncated(at));
    }
    let mut be = [0; 4];
    be.copy_from_slice(&bytes[at..at + 4]);
    Ok(u32::from_be_bytes(be))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rabbit_backoff_test_support::deep_headers as deep;

    #[test]
    fn measures_and_round_trips_deep_tables_and_arrays() {
        for (levels, arrays) in [(1, false), (2, true), (65, false), (18_000, false)] {
            let entries = deep::entries(levels, arrays);
            assert_eq!(table_depth(&entries), Ok(levels), "{levels}");
            let packed = pack(&entries).unwrap();
            let unpacked = unpack(&packed).unwrap();
            assert_eq!(unpacked.entries, entries);
            assert_eq!(unpacked.depth, levels);
        }
        let entries = deep::entries(25_000, true);
        assert_eq!(table_depth(&entries), Ok(25_000));
        let packed = pack(&entries).unwrap();
        assert_eq!(packed.len(), entries.len() - 3 * 24_999 + 1);
        assert_eq!(unpack(&packed).unwrap().entries, entries);
    }

    #[test]
    fn packing_headers_deeper_than_the_limit_saves_more_than_the_marker_costs() {
        // The marker table: its length, the name, the type tag and the byte
        // array's length.
        let marker = 4 + 1 + crate::headers::DEEP_HEADERS.len() + 1 + 4;
        for arrays in [false, true] {
            let entries = deep::entries(crate::MAX_HEADER_DEPTH + 1, arrays);
            let packed = pack(&entries).unwrap();
            assert!(marker + packed.len() < 4 + entries.len());
        }
    }

    #[test]
    fn every_scalar_type_is_skipped_by_its_length() {
        let mut entries = Vec::new();
        let scalars: [(u8, &[u8]); 17] = [
            (b't', &[1]),
            (b'b', &[0xff]),
            (b'B', &[1]),
            (b's', &[0, 1]),
            (b'U', &[0, 1]),
            (b'u', &[0, 1]),
            (b'I', &[0, 0, 0, 1]),
            (b'i', &[0, 0, 0, 1]),
            (b'f', &[0, 0, 0, 0]),
            (b'D', &[2, 0, 0, 0, 1]),
            (b'L', &[0; 8]),
            (b'l', &[0; 8]),
            (b'd', &[0; 8]),
            (b'T', &[0; 8]),
            (b'S', &[0, 0, 0, 2, b'h', b'i']),
            (b'x', &[0, 0, 0, 1, 0]),
            (b'V', &[]),
        ];
        for (tag, payload) in scalars {
            entries.extend_from_slice(&[1, tag, tag]);
            entries.extend_from_slice(payload);
        }
        assert_eq!(table_depth(&entries), Ok(1));
        let packed = pack(&entries).unwrap();
        assert_eq!(unpack(&packed).unwrap().entries, entries);
        let listed = entries_of(&packed);
        assert_eq!(listed.len(), 17);
        assert_eq!(listed[14].value, [b'S', 0, 0, 0, 2, b'h', b'i']);
    }

    fn entries_of(packed: &[u8]) -> Vec<Entry> {
        entries(packed).unwrap()
    }

    #[test]
    fn lists_the_entries_with_their_depths() {
        let mut table = deep::entries(100, false);
        table.extend_from_slice(&[1, b'n', b'B', 7]);
        let listed = entries_of(&pack(&table).unwrap());
        assert_eq!(listed.len(), 2);
        assert_eq!((listed[0].name.as_str(), listed[0].depth), ("deep", 99));
        assert_eq!((listed[1].name.as_str(), listed[1].depth), ("n", 0));
        assert_eq!(listed[1].value, [b'B', 7]);
    }

    #[test]
    fn malformed_tables_are_errors() {
        // A nested table longer than what holds it.
        assert_eq!(
            table_depth(&[1, b'a', b'F', 0, 0, 0, 9, 1]),
            Err(TableError::Truncated(7))
        );
        assert_eq!(
            table_depth(&[1, b'a', b'?']),
            Err(TableError::UnknownType { tag: b'?', at: 2 })
        );
        assert_eq!(table_depth(&[1, 0xff, b'V']), Err(TableError::Name(0)));
        assert_eq!(
            table_depth(&[1, b'a', b'S', 0, 0, 1, 0]),
            Err(TableError::Truncated(2))
        );
        // Deep, then broken at the bottom: still an error, not an overflow.
        let mut deep = deep::entries(10_000, false);
        let last = deep.len() - 2;
        deep[last] = b'?';
        assert!(table_depth(&deep).is_err());
        assert!(pack(&deep).is_err());
        // Not a packed table: no end, an end too early, trailing bytes.
        assert!(unpack(&[b'F', 1, b'a']).is_err());
        assert_eq!(unpack(&[END, END]), Err(TableError::Trailing(1)));
        assert!(unpack(&[]).is_err());
    }

    /// A random well-formed value, encoded, at most `depth` levels deep.
    fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
        let scalar = prop_oneof![
            any::<bool>().prop_map(|b| vec![b't', u8::from(b)]),
            any::<u16>().prop_map(|n| {
                let mut v = vec![b'u'];
                v.extend_from_slice(&n.to_be_bytes());
                v
            }),
            proptest::collection::vec(any::<u8>(), 0..20).prop_map(|s| {
                let mut v = vec![b'S'];
                v.extend_from_slice(&(s.len() as u32).to_be_bytes());
                v.extend_from_slice(&s);
                v
            }),
            Just(vec![b'V']),
        ];
        scalar.prop_recursive(6, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(|items| {
                    let content: Vec<u8> = items.concat();
                    let mut v = vec![b'A'];
                    v.extend_from_slice(&(content.len() as u32).to_be_bytes());
                    v.extend_from_slice(&content);
                    v
                }),
                proptest::collection::vec(("[a-z]{0,5}", inner), 0..6)
                    .prop_map(|items| { table_value(&items) }),
            ]
        })
    }

    fn table_entries(items: &[(String, Vec<u8>)]) -> Vec<u8> {
        let mut content = Vec::new();
        for (name, value) in items {
            content.push(name.len() as u8);
            content.extend_from_slice(name.as_bytes());
            content.extend_from_slice(value);
        }
        content
    }

    fn table_value(items: &[(String, Vec<u8>)]) -> Vec<u8> {
        let content = table_entries(items);
        let mut v = vec![b'F'];
        v.extend_from_slice(&(content.len() as u32).to_be_bytes());
        v.extend_from_slice(&content);
        v
    }

    proptest! {
        #[test]
        fn pack_then_unpack_gives_back_every_well_formed_table(
            items in proptest::collection::vec(("[a-z]{0,5}", value_strategy()), 0..6)
        ) {
            let entries = table_entries(&items);
            let depth = table_depth(&entries).unwrap();
            let unpacked = unpack(&pack(&entries).unwrap()).unwrap();
            prop_assert_eq!(unpacked.entries, entries);
            prop_assert_eq!(unpacked.depth, depth);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = table_depth(&bytes);
            let _ = pack(&bytes);
            let _ = unpack(&bytes);
            let _ = entries(&bytes);
        }
    }
}
