//! [`LapinAcker`]: how a lapin delivery settles, and a lapin delivery as
//! the transport's [`Delivery`].

use futures_util::future::BoxFuture;
use lapin::options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions};

use super::lapin_error::transport_error;
use crate::transport::acker::{Acker, Settle};
use crate::transport::connection_loss::Lost;
use crate::transport::delivery::Delivery;
use crate::transport::transport_error::TransportError;

/// A lapin delivery as the transport's, settled through a [`LapinAcker`]
/// that gives up when its connection is `lost`.
pub(super) fn delivery(d: lapin::message::Delivery, lost: &Lost) -> Delivery {
    Delivery {
        exchange: d.exchange.into(),
        routing_key: d.routing_key.into(),
        redelivered: d.redelivered,
        properties: d.properties,
        data: d.data,
        acker: Acker::new(LapinAcker(d.acker, lost.clone(), d.delivery_tag)),
    }
}

/// What lapin's answer to an ack, a nack or a reject says: `false`, the
/// channel was closed and the delivery is not settled.
fn settled(answer: lapin::Result<bool>) -> Result<(), TransportError> {
    match answer {
        Ok(true) => Ok(()),
        Ok(false) => Err(TransportError::Closed("the channel is closed".into())),
        Err(e) => Err(transport_error(e)),
    }
}

/// Settles a lapin delivery (of this tag), giving up when its connection is lost.
struct LapinAcker(lapin::Acker, Lost, u64);

impl Settle for LapinAcker {
    fn delivery_tag(&self) -> u64 {
        self.2
    }

    fn ack(&self, multiple: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(
            self.1
                .or_fail(async move { settled(self.0.ack(BasicAckOptions { multiple }).await) }),
        )
    }

    fn nack(&self, requeue: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.1.or_fail(async move {
            let options = BasicNackOptions {
                requeue,
                ..BasicNackOptions::default()
            };
            settled(self.0.nack(options).await)
        }))
    }

    fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.1.or_fail(async move {
            settled(self.0.reject(BasicRejectOptions { requeue: true }).await)
        }))
    }
}
