//! [`Settlement`]: how a delivery is settled, and what a quorum queue
//! makes of it (a failed delivery counted, a message held back).

use tokio::time::Instant;

use crate::queue_config::QueueConfig;

/// How a consumer (or the broker, for a closing channel) settles a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settlement {
    Ack,
    /// `basic.nack` with requeue.
    Requeue,
    /// `basic.reject` with requeue: a failed delivery, on 4.3.
    Fail,
    Reject,
    /// Returned because its channel closed.
    Return,
    /// AMQP 1.0's `modified` (its annotations already set on the message).
    Modify(Modified),
}

/// A `modified` outcome's flags, and the time its `x-opt-delivery-time`
/// names on tokio's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Modified {
    pub(crate) delivery_failed: bool,
    pub(crate) undeliverable_here: bool,
    pub(crate) until: Option<Instant>,
}

impl Settlement {
    /// Whether RabbitMQ counts it as a failed delivery (`x-delivery-count`,
    /// toward the delivery limit). 3.10 counts every return; 4.3 a
    /// rejection, a closing channel's return and `modified` with
    /// `delivery-failed`, not a requeue.
    pub(crate) fn counts(self, config: &QueueConfig) -> bool {
        match self {
            Settlement::Ack | Settlement::Reject => false,
            Settlement::Requeue => !config.holds_back,
            Settlement::Fail | Settlement::Return => true,
            Settlement::Modify(m) => m.delivery_failed,
        }
    }

    /// When a quorum queue delivers the message again, held back until then:
    /// a `modified` delivery's own time, or its delayed retries' ladder.
    pub(crate) fn held_until(
        self,
        config: &QueueConfig,
        delivery_count: u32,
        now: Instant,
    ) -> Option<Instant> {
        if !config.holds_back {
            return None;
        }
        if let Settlement::Modify(Modified {
            until: Some(at), ..
        }) = self
        {
            return Some(at);
        }
        let delayed = config.delayed_retry?;
        let applies = if self.counts(config) {
            delayed.failed
        } else {
            delayed.returned
        };
        applies.then(|| now + delayed.delay(delivery_count))
    }
}
