use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Delays, NameError, NameOverrides, TopologyNames};

/// The kind of queues a consumer declares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueType {
    /// Classic queues: the broker's default. TTL dead-letering from a retry
    /// queue back to the work queue is at-most-once inside the broker.
    #[default]
    Classic,
    /// Quorum queues: replicated, with at-least-once dead-lettering from the
    /// retry queues and an explicit delivery limit on the work queue.
    Quorum,
}

/// The type of the work exchange.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
/// use backoff_core::ConsumerSpec;
///
/// let mut spec = ConsumerSpec::new("orders", "5s,15s,60s".parse()?);
/// spec.prefetch = 50;
/// spec.validate()?;
/// assert_eq!(spec.names().dead_letter_queue, "orders.dlq");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerSpec {
    /// The work queue; every default name derives from it.
    pub queue: String,
    /// The retry schedule.
    pub delays: Delays,
    /// How many unacknowledged deliveries the broker sends ahead (`basic.qos`).
    pub prefetch: u16,
    /// How many handlers run at once (at most `prefetch` are useful).
    pub concurrency: usize,
    /// Overrides of the default names.
    pub names: NameOverrides,
    /// The type of the work exchange.
    pub exchange_kind: ExchangeKind,
    /// Classic or quorum queues.
    pub queue_type: QueueType,
    /// For quorum work queues: the broker's `x-delivery-limit`, a safety net
    /// against redelivery loops that never reach the handler's verdict.
    pub delivery_limit: u32,
    /// How long one handler call may take; past it the call is abandoned and
    /// counts as a transient failure, so a hung handler never holds a message
    /// forever. `None`: no limit.
    pub handler_timeout: Option<std::time::Duration>,
}

/// The default `prefetch`.
pub(crate) const DEFAULT_PREFETCH: u16 = 10;
/// The default quorum `x-delivery-limit`.
pub(crate) const DEFAULT_DELIVERY_LIMIT: u32 = 20;

/// Why a [`ConsumerSpec`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
}

impl ConsumerSpec {
    /// A spec with the defaults: prefetch 10, concurrency 10, default names,
    /// direct work exchange, classic queues.
    pub fn new(queue: impl Into<String>, delays: Delays) -> Self {
        ConsumerSpec {
            queue: queue.into(),
            delays,
            prefetch: DEFAULT_PREFETCH,
            concurrency: usize::from(DEFAULT_PREFETCH),
            names: NameOverrides::default(),
            exchange_kind: ExchangeKind::Direct,
            queue_type: QueueType::Classic,
            delivery_limit: DEFAULT_DELIVERY_LIMIT,
            handler_timeout: None,
        }
    }

    /// Sets `prefetch` and `concurrency` together.
    pub fn with_prefetch(mut self, prefetch: u16) -> Self {
        self.prefetch = prefetch;
        self.concurrency = usize::from(prefetch);
        self
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
        let longest = self.delays.as_millis().iter().copied().max().unwrap_or(0);
        let mut problems: Vec<SpecError> = self
            .names()
            .validate(longest)
            .into_iter()
            .map(SpecError::from)
            .collect();
        if self.prefetch == 0 {
            problems.push(SpecError::ZeroPrefetch);
        }
        if self.concurrency == 0 {
            problems.push(SpecError::ZeroConcurrency);
        }
        if self.handler_timeout.is_some_and(|t| t.is_zero()) {
            problems.push(SpecError::ZeroTimeout);
        }
        if self.queue_type == QueueType::Quorum && self.delivery_limit == 0 {
            problems.push(SpecError::ZeroDeliveryLimit);
        }
        problems
    }
}
