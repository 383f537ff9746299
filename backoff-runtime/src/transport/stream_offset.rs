//! Where a consumer of a stream starts reading.

/// Where [`Channel::consume_stream`](super::Channel::consume_stream) starts
/// (`x-stream-offset`).
///
/// ```
/// use rabbit_backoff::transport::StreamOffset;
///
/// assert_eq!(StreamOffset::default(), StreamOffset::First);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamOffset {
    /// The first message the stream still holds.
    #[default]
    First,
    /// This offset, or the first the stream still holds if it is older.
    /// The broker may start at the beginning of the chunk that holds it:
    /// a reader skips what comes before (`x-stream-offset`).
    At(u64),
    /// The messages written after the consumer is attached, none before.
    Next,
}
