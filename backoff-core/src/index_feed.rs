//! How dead letters reach a consumer's dead-letter index.

/// How each dead letter reaches the dead-letter index
/// ([`DeadLetterIndexDecl`](crate::DeadLetterIndexDecl)), as
/// [`Topology::index_feed`](crate::Topology::index_feed) gives it: one way
/// on every topology, classic and quorum alike. (Before, a classic
/// topology bound the stream to the dead-letter exchange, so that the
/// broker stored a second, full copy of every dead letter; a consumer that
/// finds that binding removes it.)
///
/// ```
/// use rabbit_backoff::{ConsumerSpec, DeadLetterIndex, QueueType};
/// use rabbit_backoff::topology::{IndexFeed, Topology};
///
/// let mut spec = ConsumerSpec::new("orders", "5s".parse()?);
/// assert_eq!(Topology::of(&spec).index_feed(), Some(IndexFeed::Written));
/// spec.queue_type = Some(QueueType::Classic);
/// assert_eq!(Topology::of(&spec).index_feed(), Some(IndexFeed::Written));
/// spec.dead_letter_index = DeadLetterIndex::Off;
/// assert_eq!(Topology::of(&spec).index_feed(), None);
/// # Ok::<(), rabbit_backoff::DelayError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexFeed {
    /// The stream is bound to nothing. The consumer writes a summary of
    /// each dead letter it made (an [`IndexEntry`](crate::IndexEntry)) once
    /// the broker confirmed it in the dead-letter queue, many to a stream
    /// message ([`IndexBatch`](crate::IndexBatch)), in the background, on a
    /// connection of its own; `dlq import` writes the entries of what it
    /// imports the same way. A dead letter never waits on the stream, so a
    /// stream coordinator that lost its quorum (on a RabbitMQ 4.3 cluster
    /// that lost a node, a publish routed to a stream then blocks its
    /// channel for 30 s, and the broker closes the connection) delays the
    /// index and never a delivery. An entry the writer could not write, and
    /// a dead letter the broker made (a delivery limit, a rejection, headers
    /// too deep to copy), leave the index short of the queue; the readers'
    /// count check then reads the queue once, and the checkpoint it leaves
    /// heals the index.
    Written,
}
