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
    At(u64),
}
