//! A message as a queue holds it.

use std::sync::Arc;

use lapin::BasicProperties;
use tokio::time::Instant;

/// A message in a queue (or delivered from it and not yet settled).
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// Its position in the queue: classic queues requeue by it.
    pub(crate) seq: u64,
    /// The exchange it was last published or dead-lettered to.
    pub(crate) exchange: String,
    pub(crate) routing_key: String,
    pub(crate) properties: BasicProperties,
    pub(crate) body: Arc<[u8]>,
    pub(crate) redelivered: bool,
    /// Quorum queues: how many times it was returned after a failure.
    pub(crate) delivery_count: u32,
    /// Quorum queues: how many times it was returned at all
    /// (`x-acquired-count`, which RabbitMQ 4.x counts beside the failures).
    pub(crate) acquired_count: u32,
    /// When it expires at the head of the queue.
    pub(crate) expires_at: Option<Instant>,
}
