//! [`ConsumerSpec`]: everything a consumer is configured with.

use serde::{Deserialize, Serialize};

use super::declare_mode::DeclareMode;
use super::exchange_kind::ExchangeKind;
use super::queue_type::QueueType;
use super::retry_return::RetryReturn;
use super::spec_error::SpecError;
use crate::{Dedupe, Delays, Jitter, NameOverrides, RetryBackend, TopologyNames};

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
    /// Where a retry waits ([`RetryBackend`]): retry tiers (the default),
    /// RabbitMQ 4.3's delayed retries of the quorum work queue
    /// (`retry = "delayed"`), or the work queue holding each failed delivery
    /// back until the time its schedule asks (`retry = "scheduled"`, over
    /// AMQP 1.0, RabbitMQ 4.3).
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
