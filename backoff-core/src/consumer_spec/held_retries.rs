//! What the backends whose retries the broker holds back (`retry =
//! "delayed"` and `"scheduled"`) ask of a [`ConsumerSpec`], and the
//! delayed retry it gives the work queue.

use super::queue_type::QueueType;
use super::retry_return::RetryReturn;
use super::spec::ConsumerSpec;
use super::spec_error::SpecError;
use crate::{DelayedRetry, RetryBackend};

impl ConsumerSpec {
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
}
