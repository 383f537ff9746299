//! [`Topology`]: the exchanges, queues and bindings one consumer declares.

use serde::{Deserialize, Serialize};

use super::argument::Argument;
use super::arguments as arg;
use super::binding::Binding;
use super::dead_letter_index_decl::DeadLetterIndexDecl;
use super::exchange_decl::ExchangeDecl;
use super::queue_decl::QueueDecl;
use crate::{ConsumerSpec, ExchangeKind, IndexFeed, QueueType, RetryReturn};

/// The `x-delivery-limit` of a quorum dead-letter queue: the largest the
/// broker takes, so that no dead letter is ever dropped for having been
/// returned (a pass killed midway returns what it held).
pub const DEAD_LETTER_DELIVERY_LIMIT: i64 = i32::MAX as i64;

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
