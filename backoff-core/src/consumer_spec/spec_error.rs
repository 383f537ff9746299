//! [`SpecError`]: why a [`ConsumerSpec`](super::spec::ConsumerSpec)
//! was refused.

use super::exchange_kind::ExchangeKind;
use crate::{NameError, NotLinear};

/// Why a [`ConsumerSpec`](super::spec::ConsumerSpec) was refused.
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
        /// What the broker was found to be: the release it named (`is
        /// RabbitMQ 4.0.5`), or, when it named none, how it answered the
        /// probe of its delayed retry arguments.
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
