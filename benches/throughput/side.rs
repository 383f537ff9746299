//! The sides a run measures: the framework and its variants, and the
//! hand-written loops.

use rabbit_backoff::{DeadLetterIndex, RetryBackend};
use rabbit_backoff_core::ConsumerSpec;

use crate::scenario::Scenario;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Side {
    Framework,
    /// The hand-written loop with the article's three dead-letter headers.
    Article,
    /// The hand-written loop with the framework's dead-letter headers.
    Full,
    /// `article` over a lapin connection the runtime opened, behind its frame
    /// guard: beside `article`, what the guard costs. Only when named in
    /// `BENCH_SIDES`.
    Guarded,
    /// The framework with `dedupe` on PostgreSQL. Only when named.
    DedupePostgres,
    /// The framework with `dedupe` on Redis. Only when named.
    DedupeRedis,
    /// `article` with RabbitMQ 4.3's delayed retries instead of tiers. Only
    /// when named.
    Delayed,
    /// The stronger hand-written loop: `article`'s headers, a task spawned
    /// per delivery on the multi-thread runtime.
    Spawned,
    /// `spawned` with the framework's headers (`full`'s).
    SpawnedFull,
    /// The framework with `retry = "delayed"`. Only when named.
    FrameworkDelayed,
    /// The framework with its dead-letter index off. Only when named.
    FrameworkUnindexed,
    /// The framework with `retry = "scheduled"`: consumed over AMQP 1.0, a
    /// retry settled as `modified` with `x-opt-delivery-time`. Only when
    /// named, on a quorum target of RabbitMQ 4.3.
    FrameworkScheduled,
    /// `framework-scheduled` with its dead-letter index off. Only when
    /// named, on a quorum target of RabbitMQ 4.3.
    FrameworkScheduledUnindexed,
    /// The hand-written fe2o3-amqp loop with the same settlements as
    /// `framework-scheduled`. Only when named, on a quorum target of
    /// RabbitMQ 4.3.
    Amqp1Loop,
}

impl Side {
    pub(crate) const ALL: [Side; 14] = [
        Side::Framework,
        Side::Article,
        Side::Spawned,
        Side::SpawnedFull,
        Side::Full,
        Side::Guarded,
        Side::DedupePostgres,
        Side::DedupeRedis,
        Side::Delayed,
        Side::FrameworkDelayed,
        Side::FrameworkUnindexed,
        Side::FrameworkScheduled,
        Side::FrameworkScheduledUnindexed,
        Side::Amqp1Loop,
    ];
    pub(crate) const DEFAULT: [Side; 5] = [
        Side::Framework,
        Side::Article,
        Side::Spawned,
        Side::SpawnedFull,
        Side::Full,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Side::Framework => "framework",
            Side::Article => "article",
            Side::Full => "full",
            Side::Guarded => "guarded",
            Side::DedupePostgres => "dedupe=postgres",
            Side::DedupeRedis => "dedupe=redis",
            Side::Delayed => "delayed",
            Side::Spawned => "spawned",
            Side::SpawnedFull => "spawned-full",
            Side::FrameworkDelayed => "framework-delayed",
            Side::FrameworkUnindexed => "framework-unindexed",
            Side::FrameworkScheduled => "framework-scheduled",
            Side::FrameworkScheduledUnindexed => "framework-scheduled-unindexed",
            Side::Amqp1Loop => "amqp1-loop",
        }
    }

    /// Whether it is the framework (which runs on its own topology, the
    /// index included unless it is turned off); the others are hand-written
    /// loops on the article's topology.
    pub(crate) fn is_framework(self) -> bool {
        matches!(
            self,
            Side::Framework
                | Side::FrameworkDelayed
                | Side::FrameworkUnindexed
                | Side::FrameworkScheduled
                | Side::FrameworkScheduledUnindexed
                | Side::DedupePostgres
                | Side::DedupeRedis
        )
    }

    /// Whether it needs a quorum target on RabbitMQ 4.3 or later, which
    /// holds a `modified` delivery back until its `x-opt-delivery-time`:
    /// elsewhere it is left out of the table (with a line that says so).
    pub(crate) fn needs_scheduled_retries(self) -> bool {
        matches!(
            self,
            Side::FrameworkScheduled | Side::FrameworkScheduledUnindexed | Side::Amqp1Loop
        )
    }

    /// What the side changes in the framework's spec of a run: its retry
    /// backend, or its index.
    pub(crate) fn configure(self, spec: &mut ConsumerSpec) {
        match self {
            Side::FrameworkDelayed => spec.retry = RetryBackend::Delayed,
            Side::FrameworkScheduled => spec.retry = RetryBackend::Scheduled,
            Side::FrameworkUnindexed => spec.dead_letter_index = DeadLetterIndex::Off,
            Side::FrameworkScheduledUnindexed => {
                spec.retry = RetryBackend::Scheduled;
                spec.dead_letter_index = DeadLetterIndex::Off;
            }
            _ => {}
        }
    }

    pub(crate) fn dedupe(self) -> bool {
        matches!(self, Side::DedupePostgres | Side::DedupeRedis)
    }

    /// Whether it runs `scenario`: the dedupe sides run S1 and S4.
    pub(crate) fn runs(self, scenario: Scenario) -> bool {
        !self.dedupe() || matches!(scenario.name, "S1" | "S4")
    }
}
