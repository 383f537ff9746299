//! The id of one run over a queue or a stream: a pass's sentinel, an index
//! read's end marker.

/// An id unique enough to tell one pass's sentinel, or one index read's end
/// marker, from another's.
pub(crate) fn run_id() -> String {
    format!(
        "{:016x}{:08x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        fastrand::u32(..)
    )
}
