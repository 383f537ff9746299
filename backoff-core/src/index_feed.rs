//! How dead letters reach a consumer's dead-letter index.

/// How each dead letter reaches the dead-letter index
/// ([`DeadLetterIndexDecl`](crate::DeadLetterIndexDecl)), as
/// [`Topology::index_feed`](crate::Topology::index_feed) chooses it from
/// the queue type.
///
/// ```
/// use rabbit_backoff::{ConsumerSpec, DeadLetterIndex, QueueType};
/// use rabbit_backoff::topology::{IndexFeed, Topology};
///
/// let mut spec = ConsumerSpec::new("orders", "5s".parse()?);
/// assert_eq!(Topology::of(&spec).index_feed(), Some(IndexFeed::Written));
/// spec.queue_type = Some(QueueType::Classic);
/// assert_eq!(Topology::of(&spec).index_feed(), Some(IndexFeed::Routed));
/// spec.dead_letter_index = DeadLetterIndex::Off;
/// assert_eq!(Topology::of(&spec).index_feed(), None);
/// # Ok::<(), rabbit_backoff::DelayError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexFeed {
    /// The index's stream is bound to the dead-letter exchange beside the
    /// dead-letter queue: the broker routes each dead letter to both in one
    /// routing, those the broker makes itself (a TTL, a rejection) too.
    /// Classic topologies, on one node.
    Routed,
    /// The stream is bound to nothing. The consumer writes each dead letter
    /// it made to the stream once the broker confirmed it in the
    /// dead-letter queue, in the background, on a connection of its own.
    /// Quorum topologies: a dead letter never waits on the stream, so a
    /// stream coordinator that lost its quorum (on a RabbitMQ 4.3 cluster
    /// that lost a node, a publish routed to a stream then blocks its
    /// channel for 30 s, and the broker closes the connection) delays the
    /// index and never a delivery. An entry the writer could not write, and
    /// a dead letter the broker made, leave the index short of the queue;
    /// the readers' count check then reads the queue once, and the
    /// checkpoint it leaves heals the index.
    Written,
}
