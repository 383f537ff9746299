//! [`Release`]: which RabbitMQ release the in-memory broker behaves as.

use rabbit_backoff_core::BrokerRelease;

/// Which RabbitMQ release a [`TestBroker`](crate::TestBroker) behaves as,
/// where releases differ in what the framework relies on. The default is
/// 3.10, the oldest release the framework supports.
///
/// ```
/// use rabbit_backoff::testing::{Release, TestBroker};
///
/// let broker = TestBroker::emulating(Release::V4_3);
/// assert_eq!(broker.release(), Release::V4_3);
/// assert_eq!(TestBroker::new().release(), Release::V3_10);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Release {
    /// RabbitMQ 3.10: a quorum queue counts every return in
    /// `x-delivery-count` and delivers it again at once; `x-delayed-retry-*`
    /// arguments are accepted and ignored, as any unknown `x-` argument.
    #[default]
    V3_10,
    /// RabbitMQ 4.3: on a quorum queue, a delivery settled as AMQP 1.0's
    /// `modified` is held back until its `x-opt-delivery-time`, with the
    /// annotations given; `x-delayed-retry-type`, `-min` and `-max` hold a
    /// failed delivery (`basic.reject` with requeue) back for
    /// `min(min × n, max)` after its n-th failure, and are refused on a
    /// classic queue; only a failed delivery counts in `x-delivery-count`,
    /// not a requeue.
    V4_3,
}

impl Release {
    /// What a node of this release names itself when a connection opens.
    pub(crate) fn named(self) -> BrokerRelease {
        let version = match self {
            Release::V3_10 => "3.10.0",
            Release::V4_3 => "4.3.0",
        };
        BrokerRelease::new("RabbitMQ", version)
    }

    /// Whether quorum queues hold deliveries back (4.3's delayed retries and
    /// `modified` with `x-opt-delivery-time`).
    pub(crate) fn holds_back(self) -> bool {
        self == Release::V4_3
    }
}
