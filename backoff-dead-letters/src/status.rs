//! The depth and consumers of a consumer's queues.

use rabbit_backoff_core::TopologyNames;
use serde::Serialize;

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::inspect_queue;
use rabbit_backoff_runtime::transport::Connection;

/// The depth and consumers of one queue of a consumer's topology.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct QueueStatus {
    /// `work`, `retry` or `dead-letter`.
    pub role: &'static str,
    /// The queue.
    pub name: String,
    /// For a retry queue, its delay.
    pub delay_ms: Option<u64>,
    /// Whether the retry tier is in the current schedule (false: a tier of an
    /// older schedule that still exists).
    pub current: bool,
    /// Ready messages; `None` when the queue does not exist.
    pub messages: Option<u32>,
    /// Consumers; `None` when the queue does not exist.
    pub consumers: Option<u32>,
}

/// Every queue of one consumer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ConsumerStatus {
    /// The work queue's name.
    pub queue: String,
    /// Work queue, retry tiers by delay, dead-letter queue.
    pub queues: Vec<QueueStatus>,
}

impl ConsumerStatus {
    /// The dead-letter queue's depth (0 when it does not exist).
    pub fn dead_letters(&self) -> u32 {
        self.queues
            .iter()
            .filter(|q| q.role == "dead-letter")
            .filter_map(|q| q.messages)
            .sum()
    }
}

/// The status of a consumer's queues: the work queue, the retry tiers of
/// `delays` (the current schedule) and the dead-letter queue. `other_queues`
/// are queue names known from elsewhere (the management API): those that
/// match the retry pattern are reported as tiers of an older schedule.
pub async fn status(
    connection: &dyn Connection,
    names: &TopologyNames,
    delays: &[u64],
    other_queues: &[String],
) -> Result<ConsumerStatus, Error> {
    let mut tiers: Vec<(u64, String, bool)> = delays
        .iter()
        .map(|&ms| (ms, names.retry_queue(ms), true))
        .collect();
    for name in other_queues {
        if let Some(ms) = names.retry_delay_of(name)
            && !tiers.iter().any(|(_, n, _)| n == name)
        {
            tiers.push((ms, name.clone(), false));
        }
    }
    tiers.sort();

    let mut queues = vec![probe(connection, "work", &names.queue, None, true).await?];
    for (ms, name, current) in tiers {
        queues.push(probe(connection, "retry", &name, Some(ms), current).await?);
    }
    queues.push(
        probe(
            connection,
            "dead-letter",
            &names.dead_letter_queue,
            None,
            true,
        )
        .await?,
    );
    Ok(ConsumerStatus {
        queue: names.queue.clone(),
        queues,
    })
}

async fn probe(
    connection: &dyn Connection,
    role: &'static str,
    name: &str,
    delay_ms: Option<u64>,
    current: bool,
) -> Result<QueueStatus, Error> {
    let found = inspect_queue(connection, name).await?;
    Ok(QueueStatus {
        role,
        name: name.to_owned(),
        delay_ms,
        current,
        messages: found.map(|(messages, _)| messages),
        consumers: found.map(|(_, consumers)| consumers),
    })
}
