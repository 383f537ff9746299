//! Publishing copies of deliveries, confirmed, on a channel that is
//! replaced when the broker refuses one, and fitting them into a frame. A
//! consumer's decisions and the dead-letter replay both publish through here.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::BasicProperties;
use rabbit_backoff_core::header_limit;
use tracing::Instrument;

use crate::error::PublishFailure;
use crate::publish::confirmed::publish_confirmed;
use crate::settle::shrink_copy::{TooLarge, fit_to_frame};
use crate::telemetry::trace_context::{publish_span, traced};
use crate::transport::{Channel, Connection, Lost, Publication};

/// Where a copy goes: the exchange and routing key it is published with, the
/// queue they lead to, and the room a copy leaves there for the headers the
/// broker adds later.
#[derive(Debug)]
pub struct Target<'a> {
    /// The exchange the copy is published to.
    pub exchange: &'a str,
    /// The routing key it is published with.
    pub routing_key: &'a str,
    /// The queue they lead to.
    pub queue: &'a str,
    /// Bytes of the frame left for the headers the broker may add there
    /// ([`broker_headroom`](rabbit_backoff_core::broker_headroom)).
    pub headroom: usize,
}

/// Publishes the copies of one channel's deliveries.
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
    /// The connection's loss: no pause is worth waiting then.
    lost: Lost,
}

impl Settler {
    pub(crate) fn new(
        channel: Arc<dyn Channel>,
        connection: Arc<dyn Connection>,
        confirm_timeout: Duration,
    ) -> Self {
        Settler {
            copies: Mutex::new((Arc::clone(&channel), 0)),
            channel,
            frame_max: connection.frame_max(),
            lost: connection.lost(),
            connection,
            confirm_timeout,
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

    /// The connection's loss.
    pub(crate) fn lost(&self) -> &Lost {
        &self.lost
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
        let (channel, generation) = self.copy_channel();
        let message = Publication::new(
            target.exchange,
            target.routing_key,
            body,
            traced(&span, properties),
        );
        let published = publish_confirmed(&*channel, message, self.confirm_timeout);
        let published = if span.is_disabled() {
            published.await
        } else {
            published.instrument(span).await
        };
        if let Err(PublishFailure::Nacked) = published {
            Box::pin(self.replace_copy_channel(generation)).await;
        }
        published
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
