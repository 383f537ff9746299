//! Finding the retry topologies on a broker from what it lists: queues with
//! their arguments and bindings. A topology is recognised by its shape, not
//! its names, so adopted topologies with other names are found too: a work
//! queue dead-letters into an exchange that routes to a dead-letter queue,
//! and retry queues (queues with a TTL) dead-letter back to the work queue,
//! directly or through an exchange.

use crate::topology::arguments as arg;
use crate::{Argument, QueueType, RetryBackend, RetryReturn, delayed_arguments};

/// A queue as the broker lists it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct QueueListing {
    /// Its name.
    pub name: String,
    /// Its integer and string arguments.
    pub arguments: Vec<(String, Argument)>,
}

impl QueueListing {
    /// The queue `name`, listed with `arguments`.
    ///
    /// ```
    /// use rabbit_backoff::topology::{Argument, BindingListing, QueueListing, discover};
    ///
    /// let queues = [
    ///     QueueListing::new("orders", vec![
    ///         ("x-dead-letter-exchange".into(), Argument::Str("orders.dlx".into())),
    ///         ("x-dead-letter-routing-key".into(), Argument::Str("orders.dlq".into())),
    ///     ]),
    ///     QueueListing::new("orders.dlq", vec![]),
    ///     QueueListing::new("orders.retry_5000ms", vec![
    ///         ("x-message-ttl".into(), Argument::Int(5_000)),
    ///         ("x-dead-letter-exchange".into(), Argument::Str("".into())),
    ///         ("x-dead-letter-routing-key".into(), Argument::Str("orders".into())),
    ///     ]),
    /// ];
    /// let bindings = [BindingListing::new("orders.dlx", "orders.dlq", "orders.dlq")];
    /// let found = discover(&queues, &bindings, &|_| false);
    /// assert_eq!(found[0].queue, "orders");
    /// assert_eq!(found[0].retry_queues, vec![("orders.retry_5000ms".to_owned(), 5_000)]);
    /// ```
    pub fn new(name: impl Into<String>, arguments: Vec<(String, Argument)>) -> Self {
        QueueListing {
            name: name.into(),
            arguments,
        }
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.arguments.iter().find_map(|(k, v)| match v {
            Argument::Str(s) if k == name => Some(s.as_str()),
            _ => None,
        })
    }

    fn int(&self, name: &str) -> Option<i64> {
        self.arguments.iter().find_map(|(k, v)| match v {
            Argument::Int(n) if k == name => Some(*n),
            _ => None,
        })
    }
}

/// A binding of a queue to an exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BindingListing {
    /// The exchange.
    pub exchange: String,
    /// The queue.
    pub queue: String,
    /// The binding key.
    pub routing_key: String,
}

impl BindingListing {
    /// The binding of `queue` to `exchange` with `routing_key`.
    pub fn new(
        exchange: impl Into<String>,
        queue: impl Into<String>,
        routing_key: impl Into<String>,
    ) -> Self {
        BindingListing {
            exchange: exchange.into(),
            queue: queue.into(),
            routing_key: routing_key.into(),
        }
    }
}

/// A retry topology found on the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FoundTopology {
    /// The work queue.
    pub queue: String,
    /// Its retry queues with their TTL in milliseconds, shortest first
    /// (tiers of older schedules among them).
    pub retry_queues: Vec<(String, u64)>,
    /// How the retry queues return messages.
    pub retry_return: RetryReturn,
    /// The dead-letter exchange.
    pub dead_letter_exchange: String,
    /// The dead-letter queue.
    pub dead_letter_queue: String,
    /// The work queue's type.
    pub queue_type: QueueType,
    /// How it retries: retry queues, or RabbitMQ 4.3's delayed retries of
    /// the work queue (`x-delayed-retry-type` set, no retry queue).
    pub retry: RetryBackend,
}

/// Every retry topology among `queues` and `bindings`, in the order of the
/// work queues' names. A work queue needs a dead-letter queue and at least one
/// retry queue to count, or without one the delayed retry arguments of
/// `retry = "delayed"`; queues whose names end in `skip` are left out (the
/// operator tools' own marker queues).
pub fn discover(
    queues: &[QueueListing],
    bindings: &[BindingListing],
    skip: &dyn Fn(&str) -> bool,
) -> Vec<FoundTopology> {
    let exists = |name: &str| queues.iter().any(|q| q.name == name);
    // The queues a message published to `exchange` with `key` reaches.
    let route = |exchange: &str, key: &str| -> Vec<String> {
        if exchange.is_empty() {
            return if exists(key) {
                vec![key.to_owned()]
            } else {
                Vec::new()
            };
        }
        bindings
            .iter()
            .filter(|b| b.exchange == exchange && (b.routing_key == key || b.routing_key == "#"))
            .map(|b| b.queue.clone())
            .collect()
    };
    let mut found: Vec<FoundTopology> = queues
        .iter()
        .filter(|q| !skip(&q.name) && q.int(arg::MESSAGE_TTL).is_none())
        .filter_map(|work| {
            let dead_letter_exchange = work.text(arg::DEAD_LETTER_EXCHANGE)?;
            let key = work
                .text(arg::DEAD_LETTER_ROUTING_KEY)
                .unwrap_or(work.name.as_str());
            // The dead-letter index, a stream bound beside the dead-letter
            // queue with the same key, is not the queue.
            let is_stream = |name: &str| {
                queues
                    .iter()
                    .any(|q| q.name == name && q.text(arg::QUEUE_TYPE) == Some(arg::STREAM))
            };
            let dead_letter_queue = route(dead_letter_exchange, key)
                .into_iter()
                .find(|q| *q != work.name && !is_stream(q))?;
            let mut retry_return = RetryReturn::Queue;
            let mut retry_queues: Vec<(String, u64)> = queues
                .iter()
                .filter(|q| !skip(&q.name))
                .filter_map(|retry| {
                    let ttl = u64::try_from(retry.int(arg::MESSAGE_TTL)?).ok()?;
                    let exchange = retry.text(arg::DEAD_LETTER_EXCHANGE)?;
                    let key = retry.text(arg::DEAD_LETTER_ROUTING_KEY)?;
                    if !route(exchange, key).contains(&work.name) {
                        return None;
                    }
                    if !exchange.is_empty() {
                        retry_return = RetryReturn::Exchange;
                    }
                    Some((retry.name.clone(), ttl))
                })
                .collect();
            let delayed = work
                .text(delayed_arguments::TYPE)
                .is_some_and(|t| t != "disabled")
                && work.int(delayed_arguments::MIN).is_some();
            // A quorum work queue that dead-letters at least once, with no
            // retry queue: the consumer has the broker hold its retries
            // back (`retry = "scheduled"`); tiers set it on retry queues.
            let scheduled = work.text(arg::QUEUE_TYPE) == Some("quorum")
                && work.text(arg::DEAD_LETTER_STRATEGY) == Some("at-least-once");
            let retry = match (retry_queues.is_empty(), delayed, scheduled) {
                (false, _, _) => RetryBackend::Tiers,
                (true, true, _) => RetryBackend::Delayed,
                (true, false, true) => RetryBackend::Scheduled,
                (true, false, false) => return None,
            };
            retry_queues.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            Some(FoundTopology {
                queue: work.name.clone(),
                retry_queues,
                retry_return,
                dead_letter_exchange: dead_letter_exchange.to_owned(),
                dead_letter_queue,
                queue_type: match work.text(arg::QUEUE_TYPE) {
                    Some("quorum") => QueueType::Quorum,
                    _ => QueueType::Classic,
                },
                retry,
            })
        })
        .collect();
    found.sort_by(|a, b| a.queue.cmp(&b.queue));
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConsumerSpec, Topology};

    fn listing(topology: &Topology) -> (Vec<QueueListing>, Vec<BindingListing>) {
        let queues = topology
            .every_queue()
            .map(|q| QueueListing {
                name: q.name.clone(),
                arguments: q.arguments.clone(),
            })
            .collect();
        // The index's binding first: the index is still not taken for the
        // dead-letter queue.
        let bindings = std::iter::once(&topology.dead_letter_index.binding)
            .chain(&topology.bindings)
            .map(|b| BindingListing {
                exchange: b.exchange.clone(),
                queue: b.queue.clone(),
                routing_key: b.routing_key.clone(),
            })
            .collect();
        (queues, bindings)
    }

    #[test]
    fn finds_a_topology_whose_retries_the_broker_schedules() {
        let mut spec = ConsumerSpec::new("orders", "exponential(1s, x2, 4)".parse().unwrap());
        spec.queue_type = Some(QueueType::Quorum);
        spec.retry = RetryBackend::Scheduled;
        let (queues, bindings) = listing(&Topology::of(&spec));
        let found = discover(&queues, &bindings, &|_| false);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].retry, RetryBackend::Scheduled);
        assert!(found[0].retry_queues.is_empty());
        assert_eq!(found[0].queue_type, QueueType::Quorum);
    }

    #[test]
    fn finds_a_topology_with_delayed_retries_and_no_retry_queue() {
        let mut spec = ConsumerSpec::new("orders", "1s,2s".parse().unwrap());
        spec.queue_type = Some(QueueType::Quorum);
        spec.retry = RetryBackend::Delayed;
        let (queues, bindings) = listing(&Topology::of(&spec));
        let found = discover(&queues, &bindings, &|_| false);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].queue, "orders");
        assert_eq!(found[0].retry, RetryBackend::Delayed);
        assert!(found[0].retry_queues.is_empty());
        assert_eq!(found[0].dead_letter_queue, "orders.dlq");
        // Without the arguments, a queue with a dead-letter queue and no
        // retry queue is no consumer's.
        spec.retry = RetryBackend::Tiers;
        let (mut queues, bindings) = listing(&Topology::of(&spec));
        queues.retain(|q| q.int(arg::MESSAGE_TTL).is_none());
        assert!(discover(&queues, &bindings, &|_| false).is_empty());
    }

    #[test]
    fn finds_the_default_topology_and_an_older_tier() {
        let spec = ConsumerSpec::new("orders", "5s,15s".parse().unwrap());
        let (mut queues, bindings) = listing(&Topology::of(&spec));
        // A tier of an older schedule, still pointing back.
        queues.push(QueueListing {
            name: "orders.retry_60000ms".into(),
            arguments: vec![
                (arg::MESSAGE_TTL.into(), Argument::Int(60_000)),
                (
                    arg::DEAD_LETTER_EXCHANGE.into(),
                    Argument::Str(String::new()),
                ),
                (
                    arg::DEAD_LETTER_ROUTING_KEY.into(),
                    Argument::Str("orders".into()),
                ),
            ],
        });
        // An unrelated queue and a marker queue.
        queues.push(QueueListing {
            name: "audit".into(),
            arguments: Vec::new(),
        });
        queues.push(QueueListing {
            name: "orders.dlq.pass".into(),
            arguments: Vec::new(),
        });
        let found = discover(&queues, &bindings, &|name| name.ends_with(".pass"));
        assert_eq!(found.len(), 1);
        let orders = &found[0];
        assert_eq!(orders.queue, "orders");
        assert_eq!(orders.dead_letter_queue, "orders.dlq");
        assert_eq!(orders.dead_letter_exchange, "orders.dlx");
        assert_eq!(
            orders.retry_queues,
            [
                ("orders.retry_5000ms".to_owned(), 5000),
                ("orders.retry_15000ms".to_owned(), 15000),
                ("orders.retry_60000ms".to_owned(), 60000)
            ]
        );
        assert_eq!(orders.retry_return, RetryReturn::Queue);
    }

    #[test]
    fn finds_an_adopted_topology_by_its_shape() {
        // The article's names: retry queues return through the work exchange.
        let mut spec = ConsumerSpec::new("work", "100ms,200ms".parse().unwrap());
        spec.retry_return = RetryReturn::Exchange;
        spec.queue_type = Some(QueueType::Quorum);
        spec.names.exchange = Some("work_exchange".into());
        spec.names.retry_queue = Some("retry_{ms}ms".into());
        spec.names.dead_letter_exchange = Some("dlx_exchange".into());
        spec.names.dead_letter_queue = Some("dead_letters".into());
        spec.names.dead_letter_routing_key = Some("dead".into());
        let (queues, bindings) = listing(&Topology::of(&spec));
        let found = discover(&queues, &bindings, &|_| false);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].queue, "work");
        assert_eq!(found[0].dead_letter_queue, "dead_letters");
        assert_eq!(found[0].retry_return, RetryReturn::Exchange);
        assert_eq!(found[0].queue_type, QueueType::Quorum);
        assert_eq!(found[0].retry_queues.len(), 2);
    }

    #[test]
    fn a_queue_with_a_dead_letter_exchange_but_no_tiers_is_not_a_consumer() {
        let queues = vec![
            QueueListing {
                name: "app".into(),
                arguments: vec![(arg::DEAD_LETTER_EXCHANGE.into(), Argument::Str("x".into()))],
            },
            QueueListing {
                name: "app.dead".into(),
                arguments: Vec::new(),
            },
        ];
        let bindings = vec![BindingListing {
            exchange: "x".into(),
            queue: "app.dead".into(),
            routing_key: "app".into(),
        }];
        assert!(discover(&queues, &bindings, &|_| false).is_empty());
    }
}
