//! Settling deliveries on one channel: ack, requeue (at once or after a
//! pause), reject into the dead-letter exchange, and republish-then-ack. The
//! consumer loop and the dead-letter replay both settle through here.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use lapin::BasicProperties;
use rabbit_backoff_core::header_limit;

use crate::PublishFailure;
use crate::settle::frame_fit::{TooLarge, fit_to_frame};
use crate::settle::publish::publish_confirmed;
use crate::settle::trace_context::{publish_span, traced};
use crate::transport::{Acker, Channel, Connection, Lost};
use tracing::Instrument;

/// How long a message whose republish failed is held before it is requeued,
/// so that a broken retry or dead-letter route never turns into a hot loop.
pub(crate) const REQUEUE_PAUSE: Duration = Duration::from_secs(1);

/// What to do when a copy came back unroutable, before the original is
/// requeued: declare (or check) the topology again.
pub(crate) type Repair = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// Where a copy goes: the exchange and routing key it is published with, the
/// queue they lead to, and the room a copy leaves there for the headers the
/// broker adds later.
pub(crate) struct Target<'a> {
    pub(crate) exchange: &'a str,
    pub(crate) routing_key: &'a str,
    pub(crate) queue: &'a str,
    pub(crate) headroom: usize,
}

/// Settles the deliveries of one channel.
pub(crate) struct Settler {
    /// The channel it was made with: it publishes copies too, until the
    /// broker refuses one there.
    channel: Arc<dyn Channel>,
    /// The channel copies are published on, and how many times it was
    /// replaced (so that many refusals at once replace it once).
    copies: Mutex<(Arc<dyn Channel>, u64)>,
    /// Where a new channel for copies is opened.
    connection: Arc<dyn Connection>,
    frame_max: u32,
    confirm_timeout: Duration,
    repair: Option<Repair>,
    /// The connection's loss: no pause is worth waiting then.
    lost: Lost,
}

impl Settler {
    pub(crate) fn new(
        channel: Arc<dyn Channel>,
        connection: Arc<dyn Connection>,
        confirm_timeout: Duration,
        repair: Option<Repair>,
    ) -> Self {
        Settler {
            copies: Mutex::new((Arc::clone(&channel), 0)),
            channel,
            frame_max: connection.frame_max(),
            lost: connection.lost(),
            connection,
            confirm_timeout,
            repair,
        }
    }

    /// The channel copies go to now, and its generation.
    fn copy_channel(&self) -> (Arc<dyn Channel>, u64) {
        let copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        (Arc::clone(&copies.0), copies.1)
    }

    /// After the broker refused a copy published on generation `refused`:
    /// publishes the next copies on a new channel. RabbitMQ 3.10 can go on
    /// refusing every publish to a quorum queue on a channel that first
    /// published to it while its leader was moving to another node, until
    /// that node comes back; a new channel publishes to the new leader. A
    /// genuine refusal (a full queue with `reject-publish`) costs one
    /// channel per refused round.
    async fn replace_copy_channel(&self, refused: u64) {
        if self.copy_channel().1 != refused || self.lost.is_lost() {
            return;
        }
        let fresh = match self.connection.open_channel().await {
            Ok(fresh) => fresh,
            Err(e) => {
                tracing::debug!("opening a new channel for copies: {e}");
                return;
            }
        };
        let mut copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        if copies.1 == refused {
            tracing::info!("the broker refused a copy: publishing the next ones on a new channel");
            // The one replaced closes once its last publish is done with it
            // (the first channel stays open: it consumes).
            *copies = (fresh, refused + 1);
        }
    }

    pub(crate) fn channel(&self) -> &dyn Channel {
        &*self.channel
    }

    pub(crate) fn frame_max(&self) -> u32 {
        self.frame_max
    }

    /// Acks; `false` when the channel is gone (the broker then redelivers).
    pub(crate) async fn ack(&self, acker: &Acker) -> bool {
        match acker.ack().await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("not acked ({e}); the broker will redeliver the message");
                false
            }
        }
    }

    /// Gives a delivery that was never started back to its queue at once.
    pub(crate) async fn requeue_now(&self, acker: &Acker) {
        if let Err(e) = acker.requeue().await {
            tracing::debug!("returning an unstarted delivery: {e}; the broker will redeliver it");
        }
    }

    /// Gives a delivery back to its queue after [`REQUEUE_PAUSE`], so that a
    /// failure that repeats cannot become a hot loop. Without the pause when
    /// the connection is lost: the broker returns the delivery by itself, and
    /// the consumer can reconnect at once.
    pub(crate) async fn requeue_after_pause(&self, acker: &Acker) {
        tokio::select! {
            _ = tokio::time::sleep(REQUEUE_PAUSE) => {}
            _ = self.lost.wait() => {}
        }
        if let Err(e) = acker.requeue().await {
            tracing::warn!("not requeued ({e}); the broker will redeliver the message");
        }
    }

    /// Rejects a delivery without requeue, so that its queue's dead-letter
    /// exchange moves it to the dead-letter queue inside the broker, as it
    /// is, with `x-death` saying `rejected`; `why` is logged at ERROR.
    pub(crate) async fn reject(&self, acker: &Acker, why: &str, dead_letter_queue: &str) {
        tracing::error!(
            "{why}; rejected without a copy: the broker dead-letters it to {dead_letter_queue} as it is"
        );
        if let Err(e) = acker.reject().await {
            tracing::warn!("not rejected ({e}); the broker will redeliver the message");
        }
    }

    /// The most content header a copy to `target` may take: the frame, less
    /// room for the headers the broker may add there.
    pub(crate) fn copy_limit(&self, target: &Target<'_>) -> usize {
        header_limit(self.frame_max).saturating_sub(target.headroom)
    }

    /// `properties` shrunk by the core's plan to fit a copy to `target`.
    pub(crate) fn fit(
        &self,
        properties: BasicProperties,
        target: &Target<'_>,
    ) -> Result<BasicProperties, TooLarge> {
        fit_to_frame(properties, self.copy_limit(target))
    }

    /// Publishes a copy to `target`, in a `publish` span whose trace context
    /// the copy carries, and awaits the broker's confirm.
    pub(crate) async fn publish(
        &self,
        target: &Target<'_>,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), PublishFailure> {
        let span = publish_span(target.exchange, target.routing_key);
        let properties = traced(&span, properties);
        let (channel, generation) = self.copy_channel();
        let published = publish_confirmed(
            &*channel,
            target.exchange,
            target.routing_key,
            body,
            properties,
            self.confirm_timeout,
        )
        .instrument(span)
        .await;
        if let Err(PublishFailure::Nacked) = published {
            self.replace_copy_channel(generation).await;
        }
        published
    }

    /// Publishes the copy, then acks the original once the broker confirmed
    /// it; otherwise gives the original back after a pause (repairing the
    /// topology first when the copy was unroutable). True when confirmed.
    pub(crate) async fn republish_then_ack(
        &self,
        acker: &Acker,
        target: &Target<'_>,
        body: &[u8],
        properties: BasicProperties,
    ) -> bool {
        match self.publish(target, body, properties).await {
            Ok(()) => {
                self.ack(acker).await;
                true
            }
            Err(failure) => {
                tracing::error!(
                    "republish to {} failed ({failure}); requeueing the original",
                    target.queue
                );
                if let (PublishFailure::Unroutable, Some(repair)) = (&failure, &self.repair) {
                    repair().await;
                }
                self.requeue_after_pause(acker).await;
                false
            }
        }
    }

    /// Closes the channel (every unsettled delivery returns to its queue)
    /// and the one copies went to, when another.
    pub(crate) async fn close(&self) {
        let (copies, generation) = self.copy_channel();
        if generation > 0 {
            copies.close().await;
        }
        self.channel.close().await;
    }
}
