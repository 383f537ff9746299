//! The names a run's messages go through, on the framework's topology or on
//! the article's.

use rabbit_backoff::topology::Topology;
use rabbit_backoff_core::ConsumerSpec;

use crate::side::Side;

/// The names a run's messages go through, on the framework's topology or
/// on the article's, so that publishing, the hand-written loops, counting
/// the dead letters and deleting work the same for both.
#[derive(Clone, Debug)]
pub(crate) struct Names {
    /// The work exchange and the key the messages are published with.
    pub(crate) exchange: String,
    pub(crate) routing_key: String,
    pub(crate) work_queue: String,
    pub(crate) retry_exchange: String,
    /// The retry queue of the first delay, bound to the retry exchange
    /// with its own name.
    pub(crate) retry_queue: String,
    /// The dead-letter exchange and the key a dead letter is published with.
    pub(crate) dlx: String,
    pub(crate) dlq_key: String,
    pub(crate) dlq: String,
    /// The retry queues with their delays (ms): none when the retries are
    /// not tiers.
    pub(crate) retry_queues: Vec<(u64, String)>,
    /// Every queue the run may have declared, in the order to delete them.
    pub(crate) queues: Vec<String>,
    /// Every exchange the run may have declared.
    pub(crate) exchanges: Vec<String>,
}

impl Names {
    /// The names of `side`'s topology for the run of `spec`: the
    /// framework's, or the article's under the prefix `spec.queue`.
    pub(crate) fn of(side: Side, spec: &ConsumerSpec) -> Self {
        if side.is_framework() {
            Names::framework(spec)
        } else {
            let tiers = !matches!(side, Side::Delayed | Side::Amqp1Loop);
            Names::article(&spec.queue, spec.delays.as_millis(), tiers)
        }
    }

    /// The framework's names, and every queue and exchange its topology
    /// holds, the dead-letter index's streams included.
    pub(crate) fn framework(spec: &ConsumerSpec) -> Self {
        let names = spec.names();
        let topology = Topology::of(spec);
        let mut queues: Vec<String> = Vec::new();
        // The index's streams whether or not this spec declares them: a
        // delete of a queue that is not there is a no-op.
        for queue in topology
            .every_queue()
            .chain(topology.dead_letter_index.queues())
        {
            if !queues.contains(&queue.name) {
                queues.push(queue.name.clone());
            }
        }
        Names {
            exchange: names.exchange.clone(),
            routing_key: names.routing_key.clone(),
            work_queue: names.queue.clone(),
            retry_exchange: names.retry_exchange.clone(),
            retry_queue: names.retry_queue(spec.delays.as_millis()[0]),
            dlx: names.dead_letter_exchange.clone(),
            dlq_key: names.dead_letter_routing_key.clone(),
            dlq: names.dead_letter_queue.clone(),
            retry_queues: spec
                .retry_delays()
                .into_iter()
                .map(|ms| (ms, names.retry_queue(ms)))
                .collect(),
            queues,
            exchanges: topology
                .exchanges()
                .iter()
                .map(|e| e.name.clone())
                .collect(),
        }
    }

    /// The article's names under the prefix `p`: `<p>.work_exchange` →
    /// `<p>.work_queue` (key `work`), `<p>.retry_exchange` →
    /// `<p>.retry_<ms>ms` per delay (when `tiers`), `<p>.dlx_exchange` →
    /// `<p>.dead_letter_queue` (key `dead`).
    pub(crate) fn article(p: &str, delays: &[u64], tiers: bool) -> Self {
        let retry_queue = |ms: u64| format!("{p}.retry_{ms}ms");
        let retry_queues: Vec<(u64, String)> = if tiers {
            delays.iter().map(|&ms| (ms, retry_queue(ms))).collect()
        } else {
            Vec::new()
        };
        let (work_queue, dlq) = (format!("{p}.work_queue"), format!("{p}.dead_letter_queue"));
        let (exchange, retry_exchange, dlx) = (
            format!("{p}.work_exchange"),
            format!("{p}.retry_exchange"),
            format!("{p}.dlx_exchange"),
        );
        let queues = std::iter::once(dlq.clone())
            .chain(retry_queues.iter().map(|(_, q)| q.clone()))
            .chain(std::iter::once(work_queue.clone()))
            .collect();
        let mut exchanges = vec![exchange.clone()];
        if tiers {
            exchanges.push(retry_exchange.clone());
        }
        exchanges.push(dlx.clone());
        Names {
            exchange,
            routing_key: "work".to_owned(),
            work_queue,
            retry_exchange,
            retry_queue: retry_queue(delays[0]),
            dlx,
            dlq_key: "dead".to_owned(),
            dlq,
            retry_queues,
            queues,
            exchanges,
        }
    }
}
