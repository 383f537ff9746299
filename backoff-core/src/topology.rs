//! [`Topology`]: the exchanges, queues and bindings a consumer declares,
//! with their arguments.

use serde::{Deserialize, Serialize};

use crate::{ConsumerSpec, ExchangeKind, IndexFeed, QueueType, RetryReturn};

/// Names of the queue arguments the framework declares.
pub mod arguments {
    /// Where the broker dead-letters a message (an exchange; `""` is the
    /// default exchange).
    pub const DEAD_LETTER_EXCHANGE: &str = "x-dead-letter-exchange";
    /// The routing key of a dead-lettered message.
    pub const DEAD_LETTER_ROUTING_KEY: &str = "x-dead-letter-routing-key";
    /// How long a message waits in a retry queue, in milliseconds.
    pub const MESSAGE_TTL: &str = "x-message-ttl";
    /// `classic` or `quorum`.
    pub const QUEUE_TYPE: &str = "x-queue-type";
    /// A quorum queue's delivery limit.
    pub const DELIVERY_LIMIT: &str = "x-delivery-limit";
    /// `at-least-once` dead-lettering of a quorum queue.
    pub const DEAD_LETTER_STRATEGY: &str = "x-dead-letter-strategy";
    /// What a full queue does with a new message.
    pub const OVERFLOW: &str = "x-overflow";
    /// The most bytes a stream keeps: past it, its oldest segments go.
    pub const MAX_LENGTH_BYTES: &str = "x-max-length-bytes";
    /// The size of a stream's segment files, the unit its retention drops.
    pub const STREAM_MAX_SEGMENT_SIZE_BYTES: &str = "x-stream-max-segment-size-bytes";
    /// The `x-queue-type` of a stream.
    pub const STREAM: &str = "stream";
}

/// The retention of the dead-letter index (`x-max-length-bytes`): 2 GiB,
/// about 1.6 million dead letters of 1 KiB. Past it the broker drops the
/// oldest segment, the index no longer counts what the dead-letter queue
/// holds, and `dlq groups` reads the queue instead.
pub const INDEX_MAX_BYTES: i64 = 2 << 30;

/// The segment size of the dead-letter index: retention drops whole
/// segments, so the index keeps between [`INDEX_MAX_BYTES`] less one segment
/// and [`INDEX_MAX_BYTES`].
pub const INDEX_SEGMENT_BYTES: i64 = 100 << 20;

/// The retention of the index's tombstones: 128 MiB, 8 bytes per removed
/// dead letter, more than the removals of every entry the index can hold.
pub const INDEX_REMOVALS_MAX_BYTES: i64 = 128 << 20;

/// The segment size of the index's tombstone stream.
pub const INDEX_REMOVALS_SEGMENT_BYTES: i64 = 16 << 20;

/// The `x-delivery-limit` of a quorum dead-letter queue: the largest the
/// broker takes, so that no dead letter is ever dropped for having been
/// returned (a pass killed midway returns what it held).
pub const DEAD_LETTER_DELIVERY_LIMIT: i64 = i32::MAX as i64;

use arguments as arg;

/// A queue or exchange argument value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Argument {
    /// An integer argument such as `x-message-ttl`.
    Int(i64),
    /// A string argument such as `x-dead-letter-exchange`.
    Str(String),
}

/// An exchange the consumer declares (always durable, never auto-deleted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExchangeDecl {
    /// Its name.
    pub name: String,
    /// Its type.
    pub kind: ExchangeKind,
}

/// A queue the consumer declares (always durable, never exclusive or
/// auto-deleted), with its arguments in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueDecl {
    /// Its name.
    pub name: String,
    /// Its `x-…` arguments.
    pub arguments: Vec<(String, Argument)>,
}

impl ExchangeDecl {
    /// The exchange `name`, of type `kind`.
    ///
    /// ```
    /// use rabbit_backoff::ExchangeKind;
    /// use rabbit_backoff::topology::ExchangeDecl;
    ///
    /// let exchange = ExchangeDecl::new("orders", ExchangeKind::Topic);
    /// assert_eq!(exchange.name, "orders");
    /// ```
    pub fn new(name: impl Into<String>, kind: ExchangeKind) -> Self {
        ExchangeDecl {
            name: name.into(),
            kind,
        }
    }
}

impl QueueDecl {
    /// The queue `name`, without arguments until
    /// [`with_argument`](Self::with_argument) adds them.
    ///
    /// ```
    /// use rabbit_backoff::topology::{Argument, QueueDecl};
    ///
    /// let retry = QueueDecl::new("orders.retry_5000ms")
    ///     .with_argument("x-message-ttl", Argument::Int(5_000))
    ///     .with_argument("x-dead-letter-exchange", Argument::Str("".into()));
    /// assert_eq!(retry.argument("x-message-ttl"), Some(&Argument::Int(5_000)));
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        QueueDecl {
            name: name.into(),
            arguments: Vec::new(),
        }
    }

    /// The same queue, with the argument `key` set to `value` after the
    /// arguments it has.
    pub fn with_argument(mut self, key: impl Into<String>, value: Argument) -> Self {
        self.arguments.push((key.into(), value));
        self
    }

    /// The same queue, with `arguments` after the arguments it has.
    ///
    /// ```
    /// use rabbit_backoff::topology::{Argument, QueueDecl};
    ///
    /// let listed = vec![("x-queue-type".to_owned(), Argument::Str("quorum".into()))];
    /// let queue = QueueDecl::new("orders").with_arguments(listed);
    /// assert_eq!(queue.arguments.len(), 1);
    /// ```
    pub fn with_arguments(
        mut self,
        arguments: impl IntoIterator<Item = (String, Argument)>,
    ) -> Self {
        self.arguments.extend(arguments);
        self
    }

    /// The value of one argument.
    pub fn argument(&self, key: &str) -> Option<&Argument> {
        self.arguments
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}

/// An argument of an existing queue that is not what the consumer declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ArgumentDifference {
    /// The queue.
    pub queue: String,
    /// The argument, such as `x-dead-letter-exchange`.
    pub argument: String,
    /// What the consumer declares (`None`: it does not set it).
    pub expected: Option<Argument>,
    /// What the queue has (`None`: it is not set).
    pub actual: Option<Argument>,
}

impl QueueDecl {
    /// How the arguments of an existing queue differ from this declaration:
    /// each argument set on one side and missing or different on the other.
    /// A declaration with these differences fails with PRECONDITION_FAILED.
    /// A missing `x-queue-type` and `classic` are the same: RabbitMQ (3.10
    /// and 4.x alike) declares either on a queue of the other, and 4.x lists
    /// `x-queue-type: classic` on every classic queue.
    ///
    /// ```
    /// use rabbit_backoff::{ConsumerSpec, QueueType};
    /// use rabbit_backoff::topology::{Argument, Topology};
    ///
    /// let mut spec = ConsumerSpec::new("work_queue", "1s".parse()?);
    /// spec.queue_type = Some(QueueType::Classic);
    /// let retry = &Topology::of(&spec).retry_queues[0];
    /// let existing = [
    ///     ("x-message-ttl".to_owned(), Argument::Int(1000)),
    ///     ("x-dead-letter-exchange".to_owned(), Argument::Str("work_exchange".into())),
    ///     ("x-dead-letter-routing-key".to_owned(), Argument::Str("work".into())),
    /// ];
    /// let differences = retry.differences(&existing);
    /// assert_eq!(differences.len(), 2);
    /// assert_eq!(differences[0].argument, "x-dead-letter-exchange");
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn differences(&self, actual: &[(String, Argument)]) -> Vec<ArgumentDifference> {
        let find = |list: &[(String, Argument)], key: &str| {
            list.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
        };
        let mut keys: Vec<&str> = self.arguments.iter().map(|(k, _)| k.as_str()).collect();
        for (k, _) in actual {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
        keys.into_iter()
            .filter_map(|key| {
                let expected = find(&self.arguments, key);
                let actual = find(actual, key);
                let same = expected == actual
                    || (key == arg::QUEUE_TYPE
                        && classic_or_unset(expected.as_ref())
                        && classic_or_unset(actual.as_ref()));
                (!same).then(|| ArgumentDifference {
                    queue: self.name.clone(),
                    argument: key.to_owned(),
                    expected,
                    actual,
                })
            })
            .collect()
    }
}

/// Whether an `x-queue-type` is the default: unset, or `classic`.
fn classic_or_unset(queue_type: Option<&Argument>) -> bool {
    match queue_type {
        None => true,
        Some(Argument::Str(name)) => name == "classic",
        Some(_) => false,
    }
}

/// A binding of a queue to an exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Binding {
    /// The queue.
    pub queue: String,
    /// The exchange.
    pub exchange: String,
    /// The routing key.
    pub routing_key: String,
}

impl Binding {
    /// The binding of `queue` to `exchange` with `routing_key`.
    ///
    /// ```
    /// use rabbit_backoff::topology::Binding;
    ///
    /// let binding = Binding::new("orders", "orders", "orders.eu");
    /// assert_eq!(binding.routing_key, "orders.eu");
    /// ```
    pub fn new(
        queue: impl Into<String>,
        exchange: impl Into<String>,
        routing_key: impl Into<String>,
    ) -> Self {
        Binding {
            queue: queue.into(),
            exchange: exchange.into(),
            routing_key: routing_key.into(),
        }
    }
}

/// The dead-letter index: two streams beside the dead-letter queue. The
/// consumer writes a summary of every dead letter it makes to `entries`
/// once the broker confirmed it in the dead-letter queue, many to a stream
/// message ([`IndexBatch`](crate::IndexBatch)); `dlq import` writes what it
/// imports there too. The operator tools write what they remove from the
/// queue to `removals`. `dlq groups` reads both instead of the queue.
///
/// Neither stream is bound to anything: `binding` is the one earlier
/// versions gave `entries` (the broker then stored a second copy of every
/// dead letter), which a consumer removes when it finds it.
///
/// ```
/// use rabbit_backoff::ConsumerSpec;
/// use rabbit_backoff::topology::{Argument, Topology};
///
/// let spec = ConsumerSpec::new("orders", "5s".parse()?);
/// let index = Topology::of(&spec).dead_letter_index;
/// assert_eq!(index.entries.name, "orders.dlq.index");
/// assert_eq!(index.entries.argument("x-queue-type"), Some(&Argument::Str("stream".into())));
/// assert_eq!(index.binding.exchange, "orders.dlx");
/// assert_eq!(index.binding.routing_key, "orders.dlq");
/// assert_eq!(index.removals.name, "orders.dlq.index.removed");
/// # Ok::<(), rabbit_backoff::DelayError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeadLetterIndexDecl {
    /// The stream of entries, written to directly.
    pub entries: QueueDecl,
    /// The stream of tombstones, written to directly.
    pub removals: QueueDecl,
    /// The binding earlier versions gave `entries` (the dead-letter queue's
    /// exchange and key), which a consumer removes: no stream is bound to
    /// the dead-letter exchange any more.
    pub binding: Binding,
}

impl DeadLetterIndexDecl {
    fn of(names: &crate::TopologyNames) -> Self {
        let stream = |name: String, max: i64, segment: i64| QueueDecl {
            name,
            arguments: vec![
                (arg::QUEUE_TYPE.to_owned(), s(arg::STREAM)),
                (arg::MAX_LENGTH_BYTES.to_owned(), Argument::Int(max)),
                (
                    arg::STREAM_MAX_SEGMENT_SIZE_BYTES.to_owned(),
                    Argument::Int(segment),
                ),
            ],
        };
        let entries = stream(
            names.dead_letter_index(),
            INDEX_MAX_BYTES,
            INDEX_SEGMENT_BYTES,
        );
        DeadLetterIndexDecl {
            binding: Binding {
                queue: entries.name.clone(),
                exchange: names.dead_letter_exchange.clone(),
                routing_key: names.dead_letter_routing_key.clone(),
            },
            entries,
            removals: stream(
                names.dead_letter_index_removals(),
                INDEX_REMOVALS_MAX_BYTES,
                INDEX_REMOVALS_SEGMENT_BYTES,
            ),
        }
    }

    /// Its two streams.
    pub fn queues(&self) -> [&QueueDecl; 2] {
        [&self.entries, &self.removals]
    }
}

/// Everything one consumer declares, in declaration order (exchanges, then
/// queues, then bindings).
///
/// ```
/// use rabbit_backoff::ConsumerSpec;
/// use rabbit_backoff::topology::{Argument, Topology};
///
/// let spec = ConsumerSpec::new("orders", "5s,15s,60s".parse()?);
/// let topology = Topology::of(&spec);
/// let retry = &topology.retry_queues[0];
/// assert_eq!(retry.name, "orders.retry_5000ms");
/// assert_eq!(retry.argument("x-message-ttl"), Some(&Argument::Int(5000)));
/// // Expired messages go straight back to the work queue, and only to it.
/// assert_eq!(retry.argument("x-dead-letter-exchange"), Some(&Argument::Str("".into())));
/// assert_eq!(retry.argument("x-dead-letter-routing-key"), Some(&Argument::Str("orders".into())));
/// # Ok::<(), rabbit_backoff::DelayError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Topology {
    /// The work exchange.
    pub work_exchange: ExchangeDecl,
    /// The work queue.
    pub work_queue: QueueDecl,
    /// The retry exchange.
    pub retry_exchange: ExchangeDecl,
    /// One retry queue per distinct delay ([`ConsumerSpec::retry_delays`]):
    /// each tier's delay, or with jitter each of its sub-delays, in tier
    /// order. Tiers with equal delays share their queue.
    pub retry_queues: Vec<QueueDecl>,
    /// The dead-letter exchange.
    pub dead_letter_exchange: ExchangeDecl,
    /// The dead-letter queue.
    pub dead_letter_queue: QueueDecl,
    /// Every binding.
    pub bindings: Vec<Binding>,
    /// The dead-letter index, declared after the rest when the broker can
    /// (not on the in-memory broker, which has no streams); not part of
    /// [`queues`](Self::queues) or [`bindings`](Self::bindings), which a
    /// consumer needs and a passive declaration checks.
    pub dead_letter_index: DeadLetterIndexDecl,
    /// Whether the consumer asked for the index
    /// ([`ConsumerSpec::dead_letter_index`]); how dead letters reach it is
    /// [`index_feed`](Self::index_feed).
    #[serde(default)]
    pub index: crate::DeadLetterIndex,
}

fn s(v: &str) -> Argument {
    Argument::Str(v.to_owned())
}

impl Topology {
    /// How dead letters reach the dead-letter index, or `None` when the
    /// consumer turned it off ([`ConsumerSpec::dead_letter_index`]): written
    /// by the consumer on every topology ([`IndexFeed`] says how).
    ///
    /// ```
    /// use rabbit_backoff::{ConsumerSpec, DeadLetterIndex};
    /// use rabbit_backoff::topology::{IndexFeed, Topology};
    ///
    /// let mut spec = ConsumerSpec::new("orders", "5s".parse()?);
    /// assert_eq!(Topology::of(&spec).index_feed(), Some(IndexFeed::Written));
    /// spec.dead_letter_index = DeadLetterIndex::Off;
    /// assert_eq!(Topology::of(&spec).index_feed(), None);
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn index_feed(&self) -> Option<IndexFeed> {
        match self.index {
            crate::DeadLetterIndex::Off => None,
            crate::DeadLetterIndex::On => Some(IndexFeed::Written),
        }
    }

    /// The topology a consumer declares.
    pub fn of(spec: &ConsumerSpec) -> Self {
        let n = spec.names();
        let queue_type = spec.effective_queue_type();
        let quorum = queue_type == QueueType::Quorum;
        // Every queue names its type, classic too: a queue declared without
        // `x-queue-type` takes the virtual host's `default_queue_type`
        // (RabbitMQ 3.10 and later), which would give this topology's
        // arguments to queues of another type.
        let typed = (arg::QUEUE_TYPE.to_owned(), s(queue_type.as_str()));

        let mut work_args = vec![
            (
                arg::DEAD_LETTER_EXCHANGE.to_owned(),
                s(&n.dead_letter_exchange),
            ),
            (
                arg::DEAD_LETTER_ROUTING_KEY.to_owned(),
                s(&n.dead_letter_routing_key),
            ),
        ];
        work_args.push(typed.clone());
        if quorum {
            work_args.push((
                arg::DELIVERY_LIMIT.to_owned(),
                Argument::Int(i64::from(spec.delivery_limit)),
            ));
        }
        if let Some(delayed) = spec.delayed_retry() {
            work_args.extend(delayed.arguments());
        }
        if spec.retry == crate::RetryBackend::Scheduled {
            // The work queue dead-letters the consumer's dead letters
            // itself: at least once, so that none is lost on the way.
            work_args.push((arg::DEAD_LETTER_STRATEGY.to_owned(), s("at-least-once")));
            work_args.push((arg::OVERFLOW.to_owned(), s("reject-publish")));
        }
        let (return_exchange, return_key) = Self::retry_return_route(spec);

        let retry_queues = spec
            .retry_delays()
            .into_iter()
            .map(|ms| {
                let mut arguments = vec![
                    (arg::MESSAGE_TTL.to_owned(), Argument::Int(ms as i64)),
                    (arg::DEAD_LETTER_EXCHANGE.to_owned(), s(&return_exchange)),
                    (arg::DEAD_LETTER_ROUTING_KEY.to_owned(), s(&return_key)),
                    typed.clone(),
                ];
                if quorum {
                    arguments.push((arg::DEAD_LETTER_STRATEGY.to_owned(), s("at-least-once")));
                    arguments.push((arg::OVERFLOW.to_owned(), s("reject-publish")));
                }
                QueueDecl {
                    name: n.retry_queue(ms),
                    arguments,
                }
            })
            .collect::<Vec<_>>();

        let mut dlq_args = vec![typed];
        if quorum {
            // Nothing the queue holds may be dropped for having been
            // returned too often (RabbitMQ 4.0 and later give a quorum queue
            // a limit of 20 when none is named, and drop what goes past it
            // where no dead-letter exchange is set, as on a dead-letter
            // queue): the dead letters stay until an operator moves them.
            dlq_args.push((
                arg::DELIVERY_LIMIT.to_owned(),
                Argument::Int(DEAD_LETTER_DELIVERY_LIMIT),
            ));
        }

        let mut bindings = vec![Binding {
            queue: n.queue.clone(),
            exchange: n.exchange.clone(),
            routing_key: n.routing_key.clone(),
        }];
        bindings.extend(retry_queues.iter().map(|q| Binding {
            queue: q.name.clone(),
            exchange: n.retry_exchange.clone(),
            routing_key: q.name.clone(),
        }));
        bindings.push(Binding {
            queue: n.dead_letter_queue.clone(),
            exchange: n.dead_letter_exchange.clone(),
            routing_key: n.dead_letter_routing_key.clone(),
        });

        Topology {
            work_exchange: ExchangeDecl {
                name: n.exchange.clone(),
                kind: spec.exchange_kind,
            },
            work_queue: QueueDecl {
                name: n.queue.clone(),
                arguments: work_args,
            },
            retry_exchange: ExchangeDecl {
                name: n.retry_exchange.clone(),
                kind: ExchangeKind::Direct,
            },
            retry_queues,
            dead_letter_exchange: ExchangeDecl {
                name: n.dead_letter_exchange.clone(),
                kind: ExchangeKind::Direct,
            },
            dead_letter_queue: QueueDecl {
                name: n.dead_letter_queue.clone(),
                arguments: dlq_args,
            },
            bindings,
            dead_letter_index: DeadLetterIndexDecl::of(&n),
            index: spec.dead_letter_index,
        }
    }

    /// The exchange and routing key through which an expired retry returns,
    /// after [`ConsumerSpec::retry_return`].
    ///
    /// ```
    /// use rabbit_backoff::{ConsumerSpec, RetryReturn};
    /// use rabbit_backoff::topology::Topology;
    ///
    /// let mut spec = ConsumerSpec::new("work_queue", "1s".parse()?);
    /// // The default exchange routes by queue name: straight back to the work
    /// // queue and to no other, whatever the type of the work exchange.
    /// assert_eq!(Topology::retry_return_route(&spec), ("".into(), "work_queue".into()));
    /// spec.names.exchange = Some("work_exchange".into());
    /// spec.names.routing_key = Some("work".into());
    /// spec.retry_return = RetryReturn::Exchange;
    /// assert_eq!(Topology::retry_return_route(&spec), ("work_exchange".into(), "work".into()));
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn retry_return_route(spec: &ConsumerSpec) -> (String, String) {
        let n = spec.names();
        match spec.retry_return {
            RetryReturn::Queue => (String::new(), n.queue),
            RetryReturn::Exchange => (n.exchange, n.routing_key),
        }
    }

    /// The exchanges, in declaration order: the work exchange, the retry
    /// exchange when there are retry queues to route to (none with
    /// `retry = "delayed"`), the dead-letter exchange.
    ///
    /// ```
    /// use rabbit_backoff::{ConsumerSpec, QueueType, RetryBackend};
    /// use rabbit_backoff::topology::Topology;
    ///
    /// let mut spec = ConsumerSpec::new("orders", "1s,2s".parse()?);
    /// assert_eq!(Topology::of(&spec).exchanges().len(), 3);
    /// spec.queue_type = Some(QueueType::Quorum);
    /// spec.retry = RetryBackend::Delayed;
    /// let names: Vec<_> = Topology::of(&spec).exchanges().iter().map(|e| e.name.clone()).collect();
    /// assert_eq!(names, ["orders", "orders.dlx"]);
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn exchanges(&self) -> Vec<&ExchangeDecl> {
        let mut exchanges = vec![&self.work_exchange];
        if !self.retry_queues.is_empty() {
            exchanges.push(&self.retry_exchange);
        }
        exchanges.push(&self.dead_letter_exchange);
        exchanges
    }

    /// Every queue the topology may hold: [`queues`](Self::queues), then the
    /// streams of the dead-letter index. What to delete to remove it all.
    ///
    /// ```
    /// use rabbit_backoff::ConsumerSpec;
    /// use rabbit_backoff::topology::Topology;
    ///
    /// let topology = Topology::of(&ConsumerSpec::new("orders", "5s".parse()?));
    /// assert_eq!(topology.queues().count(), 3);
    /// assert_eq!(topology.every_queue().count(), 5);
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn every_queue(&self) -> impl Iterator<Item = &QueueDecl> {
        self.queues().chain(self.dead_letter_index.queues())
    }

    /// The queues, in declaration order: dead-letter queue, retry queues, work queue.
    pub fn queues(&self) -> impl Iterator<Item = &QueueDecl> {
        std::iter::once(&self.dead_letter_queue)
            .chain(&self.retry_queues)
            .chain(std::iter::once(&self.work_queue))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ConsumerSpec {
        ConsumerSpec::new("orders", "5s,15s,60s".parse().unwrap())
    }

    #[test]
    fn delayed_retries_declare_no_retry_queue_and_set_the_work_queues_arguments() {
        let mut spec = ConsumerSpec::new("orders", "2s,4s,6s".parse().unwrap());
        spec.queue_type = Some(QueueType::Quorum);
        spec.retry = crate::RetryBackend::Delayed;
        let t = Topology::of(&spec);
        assert!(t.retry_queues.is_empty());
        assert_eq!(t.queues().count(), 2, "the dead-letter and work queues");
        assert!(
            t.bindings
                .iter()
                .all(|b| b.exchange != t.retry_exchange.name)
        );
        let work = &t.work_queue;
        assert_eq!(
            work.argument("x-delayed-retry-type"),
            Some(&Argument::Str("failed".into()))
        );
        assert_eq!(
            work.argument("x-delayed-retry-min"),
            Some(&Argument::Int(2_000))
        );
        assert_eq!(
            work.argument("x-delayed-retry-max"),
            Some(&Argument::Int(6_000))
        );
        assert_eq!(work.argument("x-delivery-limit"), Some(&Argument::Int(20)));
        spec.retry = crate::RetryBackend::Tiers;
        assert_eq!(
            Topology::of(&spec)
                .work_queue
                .argument("x-delayed-retry-min"),
            None
        );
    }

    #[test]
    fn classic_topology_matches_the_design() {
        let mut spec = spec();
        spec.queue_type = Some(QueueType::Classic);
        let t = Topology::of(&spec);
        assert_eq!(
            t.work_exchange,
            ExchangeDecl {
                name: "orders".into(),
                kind: ExchangeKind::Direct
            }
        );
        assert_eq!(
            t.work_queue.argument("x-dead-letter-exchange"),
            Some(&s("orders.dlx"))
        );
        assert_eq!(
            t.work_queue.argument("x-dead-letter-routing-key"),
            Some(&s("orders.dlq"))
        );
        // Named even when nothing named it: a vhost's default type would
        // otherwise decide (RabbitMQ 3.10 and later).
        for q in t.queues() {
            assert_eq!(
                q.argument("x-queue-type"),
                Some(&s("classic")),
                "{}",
                q.name
            );
        }
        let names: Vec<_> = t.retry_queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "orders.retry_5000ms",
                "orders.retry_15000ms",
                "orders.retry_60000ms"
            ]
        );
        assert_eq!(
            t.retry_queues[2].argument("x-message-ttl"),
            Some(&Argument::Int(60_000))
        );
        assert_eq!(
            t.dead_letter_queue.arguments,
            [(arg::QUEUE_TYPE.to_owned(), s("classic"))]
        );
        assert_eq!(t.bindings.len(), 5);
        assert!(t.bindings.contains(&Binding {
            queue: "orders.retry_15000ms".into(),
            exchange: "orders.retry".into(),
            routing_key: "orders.retry_15000ms".into(),
        }));
        assert!(t.bindings.contains(&Binding {
            queue: "orders.dlq".into(),
            exchange: "orders.dlx".into(),
            routing_key: "orders.dlq".into(),
        }));
        assert_eq!(t.queues().count(), 5);
    }

    #[test]
    fn quorum_topology_is_at_least_once_with_an_explicit_delivery_limit() {
        let mut spec = spec();
        assert_eq!(spec.queue_type, None, "quorum, the default");
        spec.delivery_limit = 7;
        let t = Topology::of(&spec);
        for q in t.queues() {
            assert_eq!(q.argument("x-queue-type"), Some(&s("quorum")), "{}", q.name);
        }
        assert_eq!(
            t.dead_letter_queue.argument("x-delivery-limit"),
            Some(&Argument::Int(DEAD_LETTER_DELIVERY_LIMIT)),
            "no dead letter dropped for having been returned"
        );
        assert_eq!(t.work_queue.argument("x-queue-type"), Some(&s("quorum")));
        assert_eq!(
            t.work_queue.argument("x-delivery-limit"),
            Some(&Argument::Int(7))
        );
        for q in &t.retry_queues {
            assert_eq!(
                q.argument("x-dead-letter-strategy"),
                Some(&s("at-least-once"))
            );
            assert_eq!(q.argument("x-overflow"), Some(&s("reject-publish")));
        }
    }

    #[test]
    fn differences_name_each_argument_both_ways() {
        let mut spec = spec();
        spec.queue_type = Some(QueueType::Classic);
        let t = Topology::of(&spec);
        let retry = &t.retry_queues[0];
        assert!(retry.differences(&retry.arguments).is_empty());
        let existing = vec![
            (arg::MESSAGE_TTL.to_owned(), Argument::Int(5000)),
            (arg::DEAD_LETTER_EXCHANGE.to_owned(), s("orders")),
            (arg::DEAD_LETTER_ROUTING_KEY.to_owned(), s("orders")),
            (arg::QUEUE_TYPE.to_owned(), s("classic")),
        ];
        assert_eq!(
            retry.differences(&existing),
            vec![ArgumentDifference {
                queue: "orders.retry_5000ms".into(),
                argument: arg::DEAD_LETTER_EXCHANGE.into(),
                expected: Some(s("")),
                actual: Some(s("orders")),
            },]
        );
        // Unset and `classic` are the same queue type; `quorum` is not.
        let quorum = vec![(arg::QUEUE_TYPE.to_owned(), s("quorum"))];
        assert_eq!(retry.differences(&quorum).len(), 4);
        let classic = [
            retry.arguments.clone(),
            vec![(arg::QUEUE_TYPE.to_owned(), s("classic"))],
        ]
        .concat();
        assert!(retry.differences(&classic).is_empty());
    }

    #[test]
    fn the_articles_topology_returns_retries_through_the_work_exchange() {
        let mut spec = ConsumerSpec::new("work_queue", "1ms,10ms".parse().unwrap());
        spec.names.exchange = Some("work_exchange".into());
        spec.names.routing_key = Some("work".into());
        spec.names.retry_exchange = Some("retry_exchange".into());
        spec.names.retry_queue = Some("retry_{ms}ms".into());
        spec.names.dead_letter_exchange = Some("dlx_exchange".into());
        spec.names.dead_letter_queue = Some("dead_letter_queue".into());
        spec.names.dead_letter_routing_key = Some("dead".into());
        spec.retry_return = RetryReturn::Exchange;
        // The article declares classic queues.
        spec.queue_type = Some(QueueType::Classic);
        let t = Topology::of(&spec);
        let retry = &t.retry_queues[0];
        assert_eq!(retry.name, "retry_1ms");
        assert_eq!(
            retry.arguments,
            vec![
                (arg::MESSAGE_TTL.to_owned(), Argument::Int(1)),
                (arg::DEAD_LETTER_EXCHANGE.to_owned(), s("work_exchange")),
                (arg::DEAD_LETTER_ROUTING_KEY.to_owned(), s("work")),
                (arg::QUEUE_TYPE.to_owned(), s("classic")),
            ]
        );
        // Everything else is as with the queue route.
        spec.retry_return = RetryReturn::Queue;
        let q = Topology::of(&spec);
        assert_eq!(q.work_queue, t.work_queue);
        assert_eq!(q.bindings, t.bindings);
        assert_eq!(
            q.retry_queues[1].argument(arg::DEAD_LETTER_EXCHANGE),
            Some(&s(""))
        );
        assert_eq!(
            q.retry_queues[1].argument(arg::DEAD_LETTER_ROUTING_KEY),
            Some(&s("work_queue"))
        );
    }
}
