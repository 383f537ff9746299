//! [`Acker`]: settles one delivery, once, through the [`Settle`] each
//! implementation provides.

use futures_util::future::BoxFuture;

use super::modification::Modification;
use super::transport_error::TransportError;

/// How a delivery is settled; each implementation provides its own.
pub trait Settle: Send + Sync + 'static {
    /// The delivery's tag: the deliveries of one channel are numbered from
    /// 1, in the order the broker sent them.
    fn delivery_tag(&self) -> u64;
    /// Acknowledges the delivery; with `multiple`, every unacknowledged
    /// delivery of its channel with a smaller tag as well (`basic.ack` with
    /// `multiple`, one frame for many deliveries).
    fn ack(&self, multiple: bool) -> BoxFuture<'_, Result<(), TransportError>>;
    /// Returns it: to its queue when `requeue` (with `redelivered` set), or
    /// dead-letters it through its queue's dead-letter exchange otherwise.
    fn nack(&self, requeue: bool) -> BoxFuture<'_, Result<(), TransportError>>;
    /// Returns it to its queue as a failed delivery (`basic.reject` with
    /// requeue). RabbitMQ 4.3 tells the two returns apart on a quorum queue:
    /// this one counts in `x-delivery-count` (and toward the delivery limit)
    /// and is held back by the queue's delayed retry; a `nack` with requeue
    /// is neither. Before 4.3, and on the in-memory broker, the two are the
    /// same.
    fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>>;
    /// Settles it as `modified` (AMQP 1.0's outcome) with `modification`'s
    /// flags and annotations. The default refuses: only a delivery of a
    /// [holding channel](super::connection::Connection::open_holding_channel)
    /// can.
    fn modify(&self, modification: Modification) -> BoxFuture<'_, Result<(), TransportError>> {
        let _ = modification;
        Box::pin(async {
            Err(TransportError::Other(
                "this delivery cannot be settled as `modified` (an AMQP 1.0 outcome)".to_owned(),
            ))
        })
    }
}

/// Settles one delivery, once. A delivery dropped unsettled stays
/// unacknowledged until its channel closes.
pub struct Acker(Box<dyn Settle>);

impl Acker {
    /// An acker backed by `settle`.
    pub fn new(settle: impl Settle) -> Self {
        Acker(Box::new(settle))
    }

    /// The delivery's tag on its channel.
    pub fn delivery_tag(&self) -> u64 {
        self.0.delivery_tag()
    }

    /// Acknowledges the delivery. An error: the channel is gone, and the
    /// broker will redeliver the message.
    pub async fn ack(&self) -> Result<(), TransportError> {
        self.0.ack(false).await
    }

    /// Acknowledges the delivery and every unacknowledged delivery of its
    /// channel with a smaller tag, in one `basic.ack` with `multiple`. A
    /// delivery nacked before is not acknowledged again.
    pub async fn ack_multiple(&self) -> Result<(), TransportError> {
        self.0.ack(true).await
    }

    /// Returns the delivery to its queue, marked redelivered.
    pub async fn requeue(&self) -> Result<(), TransportError> {
        self.0.nack(true).await
    }

    /// Returns the delivery to its queue as a failed delivery
    /// (`basic.reject` with requeue), which RabbitMQ 4.3 counts and, under a
    /// delayed retry, holds back (see [`Settle::fail`]).
    pub async fn fail(&self) -> Result<(), TransportError> {
        self.0.fail().await
    }

    /// Settles the delivery as `modified` (see [`Modification`]), as only
    /// a delivery of a
    /// [holding channel](super::connection::Connection::open_holding_channel)
    /// can be; others refuse.
    pub async fn modify(&self, modification: Modification) -> Result<(), TransportError> {
        self.0.modify(modification).await
    }

    /// Rejects the delivery without requeue: its queue's dead-letter exchange
    /// takes it, with an `x-death` entry saying `rejected`.
    pub async fn reject(&self) -> Result<(), TransportError> {
        self.0.nack(false).await
    }
}
