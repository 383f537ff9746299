//! [`ConsumerSpec`]: everything a consumer is configured with, and the
//! [`SpecError`]s of an invalid one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{
    Dedupe, DelayedRetry, Delays, Jitter, NameError, NameOverrides, NotLinear, RetryBackend,
    TopologyNames,
};

/// The kind of queues a consumer declares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum QueueType {
    /// Classic queues, for adopting an existing classic topology (such as
    /// the article's). Each lives on one node; TTL dead-lettering from a
    /// retry queue back to the work queue is at-most-once inside the broker.
    Classic,
    /// Quorum queues: what a consumer that names no type declares.
    /// Replicated, with at-least-once dead-lettering from the retry queues
    /// and an explicit delivery limit on the work queue.
    #[default]
    Quorum,
}

/// The type of the work exchange.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ExchangeKind {
    /// Routes on an exact routing key (the default).
    #[default]
    Direct,
    /// Routes to every bound queue.
    Fanout,
    /// Routes on routing-key patterns.
    Topic,
    /// Routes on headers.
    Headers,
}

impl ExchangeKind {
    /// The AMQP name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            ExchangeKind::Direct => "direct",
            ExchangeKind::Fanout => "fanout",
            ExchangeKind::Topic => "topic",
            ExchangeKind::Headers => "headers",
        }
    }
}

impl fmt::Display for ExchangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExchangeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "direct" => Ok(ExchangeKind::Direct),
            "fanout" => Ok(ExchangeKind::Fanout),
            "topic" => Ok(ExchangeKind::Topic),
            "headers" => Ok(ExchangeKind::Headers),
            other => Err(format!(
                "unknown exchange type `{other}`; write \"direct\", \"fanout\", \"topic\" or \"headers\""
            )),
        }
    }
}

/// Where a message goes when its wait in a retry queue is over (the retry
/// queues' `x-dead-letter-exchange` and `x-dead-letter-routing-key`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RetryReturn {
    /// Through the default exchange, straight to the work queue and to no
    /// other queue, whatever the type of the work exchange (the default).
    #[default]
    Queue,
    /// Through the work exchange with the work queue's routing key, as the
    /// article "exponential backoff with RabbitMQ" declares its retry queues.
    /// Adopts such a topology as it stands; refused on a fanout or headers
    /// work exchange, which would deliver every retry to every bound queue.
    Exchange,
}

impl RetryReturn {
    /// The attribute value: `queue` or `exchange`.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryReturn::Queue => "queue",
            RetryReturn::Exchange => "exchange",
        }
    }

    /// Whether this route works with a work exchange of type `kind`: a fanout
    /// or headers exchange ignores the routing key, so returning a retry
    /// through it would deliver the message to every queue bound to it.
    ///
    /// ```
    /// use rabbit_backoff::{ExchangeKind, RetryReturn};
    /// assert!(RetryReturn::Exchange.check(ExchangeKind::Direct).is_ok());
    /// assert!(RetryReturn::Exchange.check(ExchangeKind::Fanout).is_err());
    /// assert!(RetryReturn::Queue.check(ExchangeKind::Fanout).is_ok());
    /// ```
    pub fn check(self, kind: ExchangeKind) -> Result<(), SpecError> {
        match (self, kind) {
            (RetryReturn::Exchange, ExchangeKind::Fanout | ExchangeKind::Headers) => {
                Err(SpecError::RetryReturnBroadcasts { kind })
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for RetryReturn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RetryReturn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "queue" => Ok(RetryReturn::Queue),
            "exchange" => Ok(RetryReturn::Exchange),
            other => Err(format!(
                "`{other}` is not a retry route; write \"queue\" (straight to the work queue, the default) or \"exchange\" (through the work exchange with the work routing key)"
            )),
        }
    }
}

/// Whether a consumer declares its topology or only checks that it exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DeclareMode {
    /// Declare every exchange, queue and binding at start-up (idempotent;
    /// the default).
    #[default]
    Declare,
    /// Declare nothing: check passively that every exchange and queue exists,
    /// for topologies that operators own (imported definitions, policies).
    /// A passive check sees that an object exists, not its arguments or
    /// bindings.
    Passive,
}

impl DeclareMode {
    /// The attribute value: `declare` or `passive`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeclareMode::Declare => "declare",
            DeclareMode::Passive => "passive",
        }
    }
}

impl fmt::Display for DeclareMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DeclareMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "declare" => Ok(DeclareMode::Declare),
            "passive" => Ok(DeclareMode::Passive),
            other => Err(format!(
                "`{other}` is not a declare mode; write \"declare\" (the consumer declares its topology, the default) or \"passive\" (it only checks that the topology exists)"
            )),
        }
    }
}

impl QueueType {
    /// The attribute value and the `x-queue-type` argument: `classic` or `quorum`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
        }
    }
}

impl FromStr for QueueType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "classic" => Ok(QueueType::Classic),
            "quorum" => Ok(QueueType::Quorum),
            other => Err(format!(
                "unknown queue type `{other}`; write \"classic\" or \"quorum\""
            )),
        }
    }
}

/// Everything that defines one consumer: its queue, its retry schedule, its
/// flow control and its names.
///
/// `#[backoff_consumer]` builds one at compile time; the runtime builder lets
/// operators change it before start-up without recompiling.
///
/// ```
/// use rabbit_backoff::ConsumerSpec;
///
/// let mut spec = ConsumerSpec::new("orders", "5s,15s,60s".parse()?);
/// spec.prefetch = 100;
/// spec.validate()?;
/// assert_eq!(spec.names().dead_letter_queue, "orders.dlq");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConsumerSpec {
    /// The work queue; every default name derives from it.
    pub queue: String,
    /// The retry schedule.
    pub delays: Delays,
    /// How many unacknowledged deliveries the broker sends ahead (`basic.qos`).
    pub prefetch: u16,
    /// How many handlers run at once (at most `prefetch` are useful); `None`
    /// follows `prefetch`, whatever it is changed to. See
    /// [`effective_concurrency`](Self::effective_concurrency).
    pub concurrency: Option<usize>,
    /// Overrides of the default names.
    pub names: NameOverrides,
    /// The type of the work exchange.
    pub exchange_kind: ExchangeKind,
    /// Classic or quorum queues, as the attribute or the builder named them;
    /// `None`: nothing named, and the consumer declares classic queues (see
    /// [`effective_queue_type`](Self::effective_queue_type)). On a cluster
    /// the runtime warns about a classic consumer whose type was not named.
    pub queue_type: Option<QueueType>,
    /// For quorum work queues: the broker's `x-delivery-limit`, a safety net
    /// against redelivery loops that never reach the handler's verdict.
    pub delivery_limit: u32,
    /// How long one handler call may take; past it the call is abandoned and
    /// counts as a transient failure, so a hung handler never holds a message
    /// forever. `None`: no limit.
    pub handler_timeout: Option<std::time::Duration>,
    /// Where an expired retry goes: straight to the work queue (the default)
    /// or through the work exchange.
    pub retry_return: RetryReturn,
    /// Declare the topology (the default), or only check that it exists.
    pub declare: DeclareMode,
    /// Spread each tier's retries over sub-queues within ±this percentage of
    /// its delay (`jitter = "20%"`); `None`: one queue per tier.
    pub jitter: Option<Jitter>,
    /// The error type's own ladders (`#[retry(delays = "…")]` variants),
    /// in milliseconds: their retry queues are declared with the consumer's.
    pub ladders: Vec<Vec<u64>>,
    /// Dead-letter a message (reason `expired`) instead of retrying it once
    /// its first failure is older than this (`max_age = "1h"`).
    pub max_age: Option<std::time::Duration>,
    /// Retry a failed handler call this many times in the process, after a
    /// short pause, before the message goes to a retry tier
    /// (`immediate = 2`): for blips that last milliseconds.
    pub immediate: u32,
    /// Stop consuming while a dependency is down (`breaker = "50% of 20,
    /// pause 30s"`); `None`: never.
    pub breaker: Option<crate::BreakerSpec>,
    /// Drop duplicate deliveries: a key that completed within the window is
    /// acknowledged without running the handler (`dedupe = "24h"`, with
    /// `dedupe_key`); needs a dedupe store on the runtime. `None`: every
    /// delivery is handled.
    pub dedupe: Option<Dedupe>,
    /// How the consumer waits between retries: retry tiers (the default),
    /// or RabbitMQ 4.3's delayed retries of its quorum work queue
    /// (`retry = "delayed"`, see [`RetryBackend::Delayed`]).
    #[serde(default)]
    pub retry: RetryBackend,
    /// Whether the consumer declares the dead-letter index beside its
    /// dead-letter queue (`dead_letter_index = "off"` to declare none, see
    /// [`DeadLetterIndex`](crate::DeadLetterIndex)).
    #[serde(default)]
    pub dead_letter_index: crate::DeadLetterIndex,
}

/// The default `prefetch`: the knee of the measured throughput curve (see
/// PERFORMANCE.md, "Choosing the default prefetch").
pub(crate) const DEFAULT_PREFETCH: u16 = 50;
/// The default quorum `x-delivery-limit`.
pub(crate) const DEFAULT_DELIVERY_LIMIT: u32 = 20;

/// Why a [`ConsumerSpec`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// A bad name.
    #[error(transparent)]
    Name(#[from] NameError),
    /// `prefetch = 0`, which RabbitMQ reads as "unlimited".
    #[error("prefetch is 0, which RabbitMQ reads as unlimited; set a bound such as 10")]
    ZeroPrefetch,
    /// `concurrency = 0`.
    #[error("concurrency is 0, so no message would ever be handled; set at least 1")]
    ZeroConcurrency,
    /// A handler timeout of zero.
    #[error(
        "handler_timeout is 0, so every call would time out; set e.g. 30s, or None for no limit"
    )]
    ZeroTimeout,
    /// A quorum work queue with a delivery limit of zero.
    #[error("delivery_limit is 0; a quorum queue needs at least 1 delivery")]
    ZeroDeliveryLimit,
    /// `retry_return = "exchange"` on a work exchange that ignores routing keys.
    #[error(
        "retry_return = \"exchange\" sends every expired retry through the work exchange, and a {kind} exchange ignores the routing key, so it would deliver each retry to every queue bound to it; use retry_return = \"queue\", which returns it straight to the work queue"
    )]
    RetryReturnBroadcasts {
        /// The work exchange's type: fanout or headers.
        kind: ExchangeKind,
    },
    /// A dedupe window of zero, which would remember no key.
    #[error("the dedupe window is 0, so no duplicate would be dropped; set e.g. 24h, or None")]
    ZeroDedupeWindow,
    /// `retry = "delayed"` on classic queues: only quorum queues hold a
    /// rejected message back.
    #[error(
        "retry = \"delayed\" uses RabbitMQ 4.3's delayed retries, which only quorum queues have; remove queue_type = \"classic\" (quorum queues are the default), or use retry = \"tiers\""
    )]
    DelayedNeedsQuorum,
    /// `retry = "delayed"` with a schedule the broker cannot wait.
    #[error(transparent)]
    DelayedNotLinear(#[from] NotLinear),
    /// `retry = "delayed"` with a delivery limit the retries would reach:
    /// the broker would dead-letter the message itself, without `x-error`.
    #[error(
        "retry = \"delayed\" counts each retry in the quorum queue's delivery count, and the queue dead-letters a message itself (without x-error) once it is past delivery_limit = {limit}; {retries} retries need delivery_limit = {need} or more"
    )]
    DelayedDeliveryLimit {
        /// The work queue's `x-delivery-limit`.
        limit: u32,
        /// How many retries the schedule has.
        retries: usize,
        /// The smallest limit that leaves room: one more than the retries.
        need: usize,
    },
    /// `retry = "delayed"` on a broker that does not apply RabbitMQ 4.3's
    /// delayed retries (found when the consumer starts, before anything is
    /// declared): it would accept the work queue's arguments and ignore
    /// them, and deliver every rejected message again at once.
    #[error(
        "retry = \"delayed\" needs a broker that applies the quorum queue argument '{argument}', and this broker {found}: RabbitMQ before 4.3 accepts it and ignores it, so every failed message would be delivered again at once, a hot loop. Run the consumer on RabbitMQ 4.3 or later, or use retry = \"tiers\" (the default)"
    )]
    DelayedUnsupported {
        /// The argument the broker does not apply: `x-delayed-retry-type`.
        argument: &'static str,
        /// What the broker is: its release, or that it accepted the
        /// argument without applying it.
        found: String,
    },
    /// `retry = "scheduled"` on classic queues: only quorum queues hold a
    /// message back until the time a consumer asks.
    #[error(
        "retry = \"scheduled\" uses RabbitMQ 4.3's held-back retries, which only quorum queues have; remove queue_type = \"classic\" (quorum queues are the default), or use retry = \"tiers\""
    )]
    ScheduledNeedsQuorum,
    /// `retry = "scheduled"` with a delivery limit the retries would reach.
    #[error(
        "retry = \"scheduled\" settles each retry as a failed delivery, which the quorum queue counts, and the queue dead-letters a message itself once it is past delivery_limit = {limit}; {retries} retries need delivery_limit = {need} or more"
    )]
    ScheduledDeliveryLimit {
        /// The work queue's `x-delivery-limit`.
        limit: u32,
        /// How many retries the longest ladder has.
        retries: usize,
        /// The smallest limit that leaves room: one more than the retries.
        need: usize,
    },
    /// `retry = "scheduled"` on a broker that does not hold a message back
    /// until `x-opt-delivery-time` (found when the consumer starts, before
    /// anything is declared).
    #[error(
        "retry = \"scheduled\" needs RabbitMQ 4.3 or later over AMQP 1.0, and this broker {found}: every failed message would be delivered again at once, a hot loop. Run the consumer on RabbitMQ 4.3 or later, or use retry = \"tiers\" (the default)"
    )]
    ScheduledUnsupported {
        /// What the broker is: its version, or that it refused AMQP 1.0.
        found: String,
    },
    /// `retry = "scheduled"` in a build without AMQP 1.0 (the runtime's
    /// feature `amqp1`, which the facade's feature `amqp1` turns on).
    #[error(
        "retry = \"scheduled\" consumes over AMQP 1.0, which this build leaves out: turn on the feature \"amqp1\" of rabbit-backoff"
    )]
    ScheduledNeedsFeature,
    /// `retry = "scheduled"` with a setting of the retry queues, which it
    /// has none of.
    #[error(
        "retry = \"scheduled\" has no retry queue: the work queue holds each retry back itself; remove {setting}, or use retry = \"tiers\""
    )]
    ScheduledExcludes {
        /// The setting: `retry_queue`, `retry_exchange` or `retry_return`.
        setting: &'static str,
    },
    /// `retry = "delayed"` with a setting only retry tiers can honour.
    #[error(
        "retry = \"delayed\" cannot honour {setting}: a failed message waits in the work queue itself, on its one linear ladder, with no retry queue and no copy per attempt; remove {setting}, or use retry = \"tiers\""
    )]
    DelayedExcludes {
        /// The setting: `jitter`, `max_age`, `retry_queue`, `retry_exchange`,
        /// `retry_return` or the error type's own ladders.
        setting: &'static str,
    },
}

impl ConsumerSpec {
    /// A spec with the defaults: prefetch 50, concurrency following prefetch,
    /// default names, direct work exchange, classic queues, retries returning
    /// straight to the work queue, the topology declared.
    pub fn new(queue: impl Into<String>, delays: Delays) -> Self {
        ConsumerSpec {
            queue: queue.into(),
            delays,
            prefetch: DEFAULT_PREFETCH,
            concurrency: None,
            names: NameOverrides::default(),
            exchange_kind: ExchangeKind::Direct,
            queue_type: None,
            delivery_limit: DEFAULT_DELIVERY_LIMIT,
            handler_timeout: None,
            retry_return: RetryReturn::Queue,
            declare: DeclareMode::Declare,
            jitter: None,
            ladders: Vec::new(),
            max_age: None,
            immediate: 0,
            breaker: None,
            dedupe: None,
            retry: RetryBackend::Tiers,
            dead_letter_index: crate::DeadLetterIndex::On,
        }
    }

    /// Every distinct delay a retry can wait, in tier order: each tier's
    /// delay, or with [`jitter`](Self::jitter) each of its sub-delays. One
    /// retry queue each; none with `retry = "delayed"` or `"scheduled"`.
    ///
    /// ```
    /// use rabbit_backoff::ConsumerSpec;
    ///
    /// let mut spec = ConsumerSpec::new("orders", "exponential(1s, x2, 4, max 4s)".parse()?);
    /// assert_eq!(spec.retry_delays(), vec![1_000, 2_000, 4_000]);
    /// spec.jitter = Some("20%".parse().unwrap());
    /// assert_eq!(spec.retry_delays()[..5], [800, 900, 1_000, 1_100, 1_200]);
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn retry_delays(&self) -> Vec<u64> {
        let mut delays = Vec::new();
        if self.retry != RetryBackend::Tiers {
            // The work queue holds retries back itself: no retry queue.
            return delays;
        }
        let ladders = self.ladders.iter().flatten();
        for &ms in self.delays.as_millis().iter().chain(ladders) {
            let subs = match self.jitter {
                Some(jitter) => jitter.spread(ms),
                None => vec![ms],
            };
            for sub in subs {
                if !delays.contains(&sub) {
                    delays.push(sub);
                }
            }
        }
        delays
    }

    /// The delay a retry of a tier of `delay_ms` waits: that delay, or with
    /// jitter the sub-delay picked by the uniform random `u` in `[0, 1)`.
    pub fn jittered(&self, delay_ms: u64, u: f64) -> u64 {
        match self.jitter {
            Some(jitter) => jitter.pick(delay_ms, u),
            None => delay_ms,
        }
    }

    /// The retry policy [`decide`](crate::decide) applies.
    pub fn policy(&self) -> crate::Policy<'_> {
        crate::Policy {
            delays: &self.delays,
            max_age: self.max_age,
            backend: self.retry,
        }
    }

    /// With `retry = "delayed"`, the work queue's delayed retry for this
    /// schedule; `None` with retry tiers, or when the schedule is not a
    /// linear ladder (which [`validate`](Self::validate) refuses).
    ///
    /// ```
    /// use rabbit_backoff::{ConsumerSpec, QueueType, RetryBackend};
    ///
    /// let mut spec = ConsumerSpec::new("orders", "2s,4s,6s".parse()?);
    /// assert_eq!(spec.delayed_retry(), None);
    /// spec.retry = RetryBackend::Delayed;
    /// spec.queue_type = Some(QueueType::Quorum);
    /// spec.validate()?;
    /// assert_eq!(spec.delayed_retry().map(|d| (d.min_ms, d.max_ms)), Some((2_000, 6_000)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delayed_retry(&self) -> Option<DelayedRetry> {
        match self.retry {
            RetryBackend::Delayed => DelayedRetry::of(&self.delays).ok(),
            RetryBackend::Tiers | RetryBackend::Scheduled => None,
        }
    }

    /// Every problem of `retry = "delayed"` with the rest of the spec: a
    /// classic queue, a schedule that is not a linear ladder, a delivery
    /// limit the retries would reach, jitter, `max_age`, the retry queues'
    /// names or route, or the error type's own ladders. Empty with retry
    /// tiers.
    pub fn delayed_problems(&self) -> Vec<SpecError> {
        let mut problems = Vec::new();
        if self.retry != RetryBackend::Delayed {
            return problems;
        }
        if self.effective_queue_type() != QueueType::Quorum {
            problems.push(SpecError::DelayedNeedsQuorum);
        }
        if let Err(e) = DelayedRetry::of(&self.delays) {
            problems.push(e.into());
        }
        let retries = self.delays.len();
        if (self.delivery_limit as usize) <= retries {
            problems.push(SpecError::DelayedDeliveryLimit {
                limit: self.delivery_limit,
                retries,
                need: retries + 1,
            });
        }
        for (set, setting) in [
            (self.jitter.is_some(), "jitter"),
            (self.max_age.is_some(), "max_age"),
            (self.names.retry_queue.is_some(), "retry_queue"),
            (self.names.retry_exchange.is_some(), "retry_exchange"),
            (self.retry_return != RetryReturn::Queue, "retry_return"),
            (
                !self.ladders.is_empty(),
                "the error type's own ladders (#[retry(delays = \"…\")])",
            ),
        ] {
            if set {
                problems.push(SpecError::DelayedExcludes { setting });
            }
        }
        problems
    }

    /// Every problem of `retry = "scheduled"` with the rest of the spec: a
    /// classic queue, a delivery limit the retries would reach (each counts
    /// as a failed delivery), the retry queues' names or route. Empty with
    /// the other backends.
    ///
    /// ```
    /// use rabbit_backoff::{ConsumerSpec, QueueType, RetryBackend, SpecError};
    ///
    /// let mut spec = ConsumerSpec::new("orders", "exponential(1s, x3, 5)".parse()?);
    /// spec.retry = RetryBackend::Scheduled;
    /// assert!(spec.scheduled_problems().is_empty());
    /// spec.queue_type = Some(QueueType::Classic);
    /// assert_eq!(spec.scheduled_problems(), [SpecError::ScheduledNeedsQuorum]);
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn scheduled_problems(&self) -> Vec<SpecError> {
        let mut problems = Vec::new();
        if self.retry != RetryBackend::Scheduled {
            return problems;
        }
        if self.effective_queue_type() != QueueType::Quorum {
            problems.push(SpecError::ScheduledNeedsQuorum);
        }
        let retries = self
            .ladders
            .iter()
            .map(|ladder| ladder.len())
            .chain(std::iter::once(self.delays.len()))
            .max()
            .unwrap_or(0);
        if (self.delivery_limit as usize) <= retries {
            problems.push(SpecError::ScheduledDeliveryLimit {
                limit: self.delivery_limit,
                retries,
                need: retries + 1,
            });
        }
        for (set, setting) in [
            (self.names.retry_queue.is_some(), "retry_queue"),
            (self.names.retry_exchange.is_some(), "retry_exchange"),
            (self.retry_return != RetryReturn::Queue, "retry_return"),
        ] {
            if set {
                problems.push(SpecError::ScheduledExcludes { setting });
            }
        }
        problems
    }

    /// Sets `prefetch`; a concurrency that was not set explicitly follows it.
    pub fn with_prefetch(mut self, prefetch: u16) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// How many handlers run at once: `concurrency` when it was set, else
    /// `prefetch`.
    ///
    /// ```
    /// use rabbit_backoff::ConsumerSpec;
    ///
    /// let mut spec = ConsumerSpec::new("orders", "5s".parse()?);
    /// spec.prefetch = 50;
    /// assert_eq!(spec.effective_concurrency(), 50);
    /// spec.concurrency = Some(4);
    /// assert_eq!(spec.effective_concurrency(), 4);
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn effective_concurrency(&self) -> usize {
        self.concurrency
            .unwrap_or_else(|| usize::from(self.prefetch))
    }

    /// The type of the queues the consumer declares: the one named, or
    /// quorum when none is. Every queue is declared with it as
    /// `x-queue-type`, so a virtual host's `default_queue_type` never changes
    /// it (see `docs/cluster.md`, "Queue type on a cluster").
    ///
    /// ```
    /// use rabbit_backoff::{ConsumerSpec, QueueType};
    ///
    /// let mut spec = ConsumerSpec::new("orders", "5s".parse()?);
    /// assert_eq!(spec.effective_queue_type(), QueueType::Quorum);
    /// assert!(!spec.queue_type_chosen());
    /// spec.queue_type = Some(QueueType::Classic);
    /// assert!(spec.queue_type_chosen());
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn effective_queue_type(&self) -> QueueType {
        self.queue_type.unwrap_or_default()
    }

    /// Whether the attribute or the builder named the queue type; a consumer
    /// that did not runs on quorum queues.
    pub fn queue_type_chosen(&self) -> bool {
        self.queue_type.is_some()
    }

    /// The resolved names.
    pub fn names(&self) -> TopologyNames {
        TopologyNames::resolve(&self.queue, &self.names)
    }

    /// Checks the whole spec; the first problem found is returned.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.problems().into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem of the spec.
    pub fn problems(&self) -> Vec<SpecError> {
        let longest = self.retry_delays().into_iter().max().unwrap_or(0);
        let mut problems: Vec<SpecError> = self
            .names()
            .validate(longest)
            .into_iter()
            .map(SpecError::from)
            .collect();
        if self.prefetch == 0 {
            problems.push(SpecError::ZeroPrefetch);
        }
        if self.concurrency == Some(0) {
            problems.push(SpecError::ZeroConcurrency);
        }
        if self.handler_timeout.is_some_and(|t| t.is_zero()) {
            problems.push(SpecError::ZeroTimeout);
        }
        if self.effective_queue_type() == QueueType::Quorum && self.delivery_limit == 0 {
            problems.push(SpecError::ZeroDeliveryLimit);
        }
        if let Err(e) = self.retry_return.check(self.exchange_kind) {
            problems.push(e);
        }
        if self.dedupe.as_ref().is_some_and(|d| d.window.is_zero()) {
            problems.push(SpecError::ZeroDedupeWindow);
        }
        problems.extend(self.delayed_problems());
        problems.extend(self.scheduled_problems());
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ConsumerSpec {
        ConsumerSpec::new("orders", "5s,15s".parse().unwrap())
    }

    #[test]
    fn concurrency_follows_prefetch_unless_set() {
        let mut s = spec();
        assert_eq!(s.effective_concurrency(), 50);
        s.prefetch = 20;
        assert_eq!(s.effective_concurrency(), 20);
        s.concurrency = Some(3);
        s.prefetch = 80;
        assert_eq!(s.effective_concurrency(), 3);
        assert_eq!(spec().with_prefetch(7).effective_concurrency(), 7);
        s.concurrency = Some(0);
        assert!(s.problems().contains(&SpecError::ZeroConcurrency));
    }

    #[test]
    fn retry_return_through_a_broadcasting_exchange_is_refused() {
        for (kind, refused) in [
            (ExchangeKind::Direct, false),
            (ExchangeKind::Topic, false),
            (ExchangeKind::Fanout, true),
            (ExchangeKind::Headers, true),
        ] {
            let mut s = spec();
            s.exchange_kind = kind;
            assert!(s.validate().is_ok(), "queue route on {kind}");
            s.retry_return = RetryReturn::Exchange;
            assert_eq!(
                s.problems()
                    .contains(&SpecError::RetryReturnBroadcasts { kind }),
                refused,
                "{kind}"
            );
        }
        let message = SpecError::RetryReturnBroadcasts {
            kind: ExchangeKind::Fanout,
        }
        .to_string();
        assert!(
            message.contains("fanout") && message.contains("retry_return = \"queue\""),
            "{message}"
        );
    }

    #[test]
    fn modes_parse_and_print() {
        for mode in [RetryReturn::Queue, RetryReturn::Exchange] {
            assert_eq!(mode.as_str().parse::<RetryReturn>(), Ok(mode));
        }
        for mode in [DeclareMode::Declare, DeclareMode::Passive] {
            assert_eq!(mode.as_str().parse::<DeclareMode>(), Ok(mode));
        }
        assert!("Exchange".parse::<RetryReturn>().is_err());
        assert!(
            "check"
                .parse::<DeclareMode>()
                .unwrap_err()
                .contains("passive")
        );
        assert_eq!(spec().retry_return, RetryReturn::Queue);
        assert_eq!(spec().declare, DeclareMode::Declare);
    }

    fn delayed(delays: &str) -> ConsumerSpec {
        let mut s = ConsumerSpec::new("orders", delays.parse().unwrap());
        s.retry = RetryBackend::Delayed;
        s.queue_type = Some(QueueType::Quorum);
        s
    }

    #[test]
    fn delayed_retries_need_a_quorum_queue_a_linear_ladder_and_room_under_the_limit() {
        assert_eq!(delayed("1s,2s,3s").validate(), Ok(()));
        let mut s = delayed("1s,2s,3s");
        s.queue_type = Some(QueueType::Classic);
        assert_eq!(s.problems(), [SpecError::DelayedNeedsQuorum]);
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("remove queue_type = \"classic\"")
        );

        let s = delayed("5s,15s,60s");
        let [SpecError::DelayedNotLinear(refused)] = &s.problems()[..] else {
            panic!("{:?}", s.problems());
        };
        assert_eq!(refused.suggestion.to_string(), "5s,10s,15s");

        let mut s = delayed("1s,2s,3s");
        s.delivery_limit = 3;
        let message = s.validate().unwrap_err().to_string();
        assert_eq!(
            s.problems(),
            [SpecError::DelayedDeliveryLimit {
                limit: 3,
                retries: 3,
                need: 4
            }]
        );
        assert!(message.contains("delivery_limit = 4 or more"), "{message}");
        s.delivery_limit = 4;
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn delayed_retries_refuse_what_only_tiers_can_honour() {
        let mut s = delayed("1s,2s");
        s.jitter = Some("20%".parse().unwrap());
        s.max_age = Some(std::time::Duration::from_secs(60));
        s.ladders = vec![vec![60_000]];
        s.names.retry_queue = Some("orders.wait_{ms}".into());
        s.retry_return = RetryReturn::Exchange;
        let settings: Vec<_> = s
            .problems()
            .into_iter()
            .map(|p| match p {
                SpecError::DelayedExcludes { setting } => setting,
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(settings.len(), 5);
        assert_eq!(
            settings[..4],
            ["jitter", "max_age", "retry_queue", "retry_return"]
        );
        // None of it matters with tiers.
        s.retry = RetryBackend::Tiers;
        s.jitter = None;
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(s.delayed_retry(), None);
    }

    #[test]
    fn a_zero_dedupe_window_is_refused() {
        let mut s = spec();
        s.dedupe = Some(Dedupe::new(std::time::Duration::from_secs(60)));
        assert!(s.validate().is_ok());
        s.dedupe = Some(Dedupe::new(std::time::Duration::ZERO));
        assert_eq!(s.validate(), Err(SpecError::ZeroDedupeWindow));
    }
}
