//! [`StillBusy`]: what a broker that did not become idle in time was doing.

use std::fmt;
use std::time::Duration;

/// What [`TestBroker::run_until_idle_within`](crate::TestBroker::run_until_idle_within) found still going on when
/// its time ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StillBusy {
    /// How much tokio time it let run.
    pub waited: Duration,
    /// The queues that were not idle, by name.
    pub queues: Vec<QueueActivity>,
}

/// One queue that is not idle.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueActivity {
    /// The queue.
    pub queue: String,
    /// Messages ready for delivery.
    pub ready: usize,
    /// Deliveries out and not settled.
    pub unacked: usize,
    /// Ready messages with a TTL running.
    pub waiting_for_ttl: usize,
    /// Messages held back until a time of their own (RabbitMQ 4.3's delayed
    /// retries and `modified` deliveries, [`Release::V4_3`](crate::Release::V4_3)).
    pub held: usize,
}

impl fmt::Display for StillBusy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the test broker was still busy after {:?}:", self.waited)?;
        for q in &self.queues {
            write!(
                f,
                " {} ({} ready, {} unacked, {} waiting for their TTL, {} held back);",
                q.queue, q.ready, q.unacked, q.waiting_for_ttl, q.held
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for StillBusy {}
