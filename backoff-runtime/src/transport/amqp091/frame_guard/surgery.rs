//! Header surgery on one content-header frame: finding its `headers`
//! property, replacing it, packing deep headers flat and unpacking them.

use rabbit_backoff_core::MAX_HEADER_DEPTH;
use rabbit_backoff_core::deep_headers::{pack, table_depth, unpack};
use rabbit_backoff_core::headers::DEEP_HEADERS;

use super::{
    BASIC_CLASS, CONTENT_ENCODING, CONTENT_TYPE, FRAME_HEADER, FRAME_OVERHEAD, HEADERS,
    PROPERTY_FLAGS,
};

/// Where the headers table of a content-header `frame` is: the start of its
/// 4-byte length and its end, within the frame. `None` without headers, or
/// when the properties before them run past the frame.
pub(super) fn headers_span(frame: &[u8]) -> Option<(usize, usize)> {
    let payload = frame.get(FRAME_HEADER..frame.len().checked_sub(1)?)?;
    let class = u16::from_be_bytes([*payload.first()?, *payload.get(1)?]);
    let flags = u16::from_be_bytes([
        *payload.get(PROPERTY_FLAGS)?,
        *payload.get(PROPERTY_FLAGS + 1)?,
    ]);
    if class != BASIC_CLASS || flags & HEADERS == 0 {
        return None;
    }
    let mut at = PROPERTY_FLAGS + 2;
    for flag in [CONTENT_TYPE, CONTENT_ENCODING] {
        if flags & flag != 0 {
            at += 1 + usize::from(*payload.get(at)?);
        }
    }
    let len = payload.get(at..at + 4)?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let end = at + 4 + len;
    (end <= payload.len()).then_some((FRAME_HEADER + at, FRAME_HEADER + end))
}

/// `frame` with the headers table at `span` replaced by `table` (its
/// length included), and its size fixed up.
pub(super) fn replace_headers(frame: &[u8], (start, end): (usize, usize), table: &[u8]) -> Vec<u8> {
    let len = frame.len() - (end - start) + table.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&frame[..3]);
    let size = u32::try_from(len - FRAME_OVERHEAD).unwrap_or(u32::MAX);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(&frame[FRAME_HEADER..start]);
    out.extend_from_slice(table);
    out.extend_from_slice(&frame[end..]);
    out
}

/// The content-header `frame` lapin gets instead, when its headers nest
/// deeper than [`MAX_HEADER_DEPTH`] (the flat table, with the headers
/// packed) or cannot be read (the flat table, empty).
pub(crate) fn flatten(frame: &[u8]) -> Option<Vec<u8>> {
    let span = headers_span(frame)?;
    let entries = &frame[span.0 + 4..span.1];
    let packed = match table_depth(entries) {
        Ok(depth) if depth <= MAX_HEADER_DEPTH => return None,
        Ok(_) => pack(entries).unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let name = DEEP_HEADERS.as_bytes();
    let entry = 1 + name.len() + 1 + 4 + packed.len();
    let mut table = Vec::with_capacity(4 + entry);
    table.extend_from_slice(&u32::try_from(entry).unwrap_or(u32::MAX).to_be_bytes());
    table.push(name.len() as u8);
    table.extend_from_slice(name);
    table.push(b'x');
    table.extend_from_slice(
        &u32::try_from(packed.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    table.extend_from_slice(&packed);
    Some(replace_headers(frame, span, &table))
}

/// The packed headers of a flat table's encoded entries: exactly one entry,
/// [`DEEP_HEADERS`], a byte array.
pub(super) fn packed_of(entries: &[u8]) -> Option<&[u8]> {
    let name = DEEP_HEADERS.as_bytes();
    let rest = entries
        .strip_prefix(&[name.len() as u8])?
        .strip_prefix(name)?
        .strip_prefix(b"x")?;
    let len = rest.get(..4)?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    (rest.len() == 4 + len).then(|| &rest[4..])
}

/// Whether the content-header `frame` carries the flat table.
pub(super) fn is_flat(frame: &[u8]) -> bool {
    headers_span(frame).is_some_and(|(start, end)| packed_of(&frame[start + 4..end]).is_some())
}

/// The content-header `frame` with the headers the flat table holds, when
/// they nest deeper than [`MAX_HEADER_DEPTH`] and the frame then fits in
/// `frame_max` bytes (0: no limit).
pub(crate) fn unflatten(frame: &[u8], frame_max: usize) -> Option<Vec<u8>> {
    let span = headers_span(frame)?;
    let unpacked = unpack(packed_of(&frame[span.0 + 4..span.1])?).ok()?;
    if unpacked.depth <= MAX_HEADER_DEPTH {
        return None;
    }
    let mut table = Vec::with_capacity(4 + unpacked.entries.len());
    table.extend_from_slice(&u32::try_from(unpacked.entries.len()).ok()?.to_be_bytes());
    table.extend_from_slice(&unpacked.entries);
    let original = replace_headers(frame, span, &table);
    (frame_max == 0 || original.len() <= frame_max).then_some(original)
}
