//! Every consumer topology on the vhost, found from the management API's
//! queues and bindings by its shape (see `rabbit_backoff::topology::discover`),
//! with the depth of each of its queues: what `rabbit-backoff status` lists
//! without `--queue`, and the consumers of the web console (feature
//! `management`).

use rabbit_backoff_core::{
    BindingListing, FoundTopology, NameOverrides, QueueListing, discover as discover_topologies,
};
use rabbit_backoff_core::{ConsumerSpec, Delays, RetryBackend};
use serde::Serialize;

use crate::management;
use crate::passes::pass_queue::is_marker_queue;

/// One queue's depth.
#[derive(Debug, Clone, Serialize)]
pub struct QueueDepth {
    /// Its name.
    pub name: String,
    /// Messages in it (ready and unacknowledged).
    pub messages: u64,
    /// Consumers attached.
    pub consumers: u64,
}

/// A retry queue with its delay.
#[derive(Debug, Clone, Serialize)]
pub struct Tier {
    /// The queue and its depth.
    #[serde(flatten)]
    pub depth: QueueDepth,
    /// Its `x-message-ttl`, in milliseconds.
    pub delay_ms: u64,
}

/// A consumer topology found on the broker.
#[derive(Debug, Clone, Serialize)]
pub struct DiscoveredConsumer {
    /// The work queue.
    pub queue: String,
    /// The names of its topology, for `Dlq::connect` (the delays are the
    /// retry queues found).
    #[serde(skip)]
    pub spec: ConsumerSpec,
    /// The work queue's depth.
    pub work: QueueDepth,
    /// Its retry queues, shortest delay first, older schedules' among them.
    pub tiers: Vec<Tier>,
    /// Its dead-letter queue.
    pub dead_letter: QueueDepth,
    /// With RabbitMQ 4.3's delayed retries (`retry = "delayed"`): the
    /// messages the work queue holds back; `None` with retry tiers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_back: Option<u64>,
}

/// Every consumer topology of the AMQP address's vhost, through the
/// management API at `management_url`.
pub fn discover(amqp_url: &str, management_url: &str) -> Result<Vec<DiscoveredConsumer>, String> {
    let queues = management::queues(management_url, amqp_url)?;
    let bindings = management::bindings(management_url, amqp_url)?;
    let listings: Vec<QueueListing> = queues
        .iter()
        .map(|q| QueueListing::new(q.name.clone(), q.arguments.clone()))
        .collect();
    let bindings: Vec<BindingListing> = bindings
        .into_iter()
        .filter(|b| b.destination_type == "queue")
        .map(|b| BindingListing::new(b.source, b.destination, b.routing_key))
        .collect();
    let depth = |name: &str| {
        let listed = queues.iter().find(|q| q.name == name);
        QueueDepth {
            name: name.to_owned(),
            messages: listed.map_or(0, |q| q.messages),
            consumers: listed.map_or(0, |q| q.consumers),
        }
    };
    Ok(discover_topologies(&listings, &bindings, &is_marker_queue)
        .into_iter()
        .map(|found| DiscoveredConsumer {
            queue: found.queue.clone(),
            spec: spec_of(&found),
            work: depth(&found.queue),
            tiers: found
                .retry_queues
                .iter()
                .map(|(name, delay_ms)| Tier {
                    depth: depth(name),
                    delay_ms: *delay_ms,
                })
                .collect(),
            dead_letter: depth(&found.dead_letter_queue),
            held_back: (found.retry != RetryBackend::Tiers).then(|| {
                queues
                    .iter()
                    .find(|q| q.name == found.queue)
                    .map_or(0, |q| q.messages_delayed)
            }),
        })
        .collect())
}

/// Runs [`discover`] off the async runtime (the management client
/// blocks).
pub async fn discover_async(
    amqp_url: &str,
    management_url: &str,
) -> Result<Vec<DiscoveredConsumer>, String> {
    let (amqp_url, management_url) = (amqp_url.to_owned(), management_url.to_owned());
    tokio::task::spawn_blocking(move || discover(&amqp_url, &management_url))
        .await
        .map_err(|e| e.to_string())?
}

/// The spec naming a found topology, enough to operate its dead letters.
fn spec_of(found: &FoundTopology) -> ConsumerSpec {
    let mut delays: Vec<u64> = found.retry_queues.iter().map(|(_, ms)| *ms).collect();
    delays.dedup();
    let delays = Delays::from_millis(
        delays
            .into_iter()
            .take(rabbit_backoff_core::MAX_TIERS as usize)
            .collect(),
    )
    .unwrap_or_else(|_| Delays::from_millis(vec![1]).expect("one delay is valid"));
    let mut spec = ConsumerSpec::new(found.queue.clone(), delays);
    spec.queue_type = Some(found.queue_type);
    spec.retry_return = found.retry_return;
    spec.retry = found.retry;
    spec.names = NameOverrides::default();
    spec.names.dead_letter_exchange = Some(found.dead_letter_exchange.clone());
    spec.names.dead_letter_queue = Some(found.dead_letter_queue.clone());
    spec
}
