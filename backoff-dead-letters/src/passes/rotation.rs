//! The rotation of a [pass](super::pass): the sentinel behind the last
//! message, the copies to the back, and the repair of a rotation a killed
//! pass left. The flag that says a rotation is under way, and the
//! sentinel's and the flag's messages, are in [`marker`](super::marker);
//! the module doc of `pass` says how they fit together.

use std::collections::VecDeque;

use futures_util::future::join_all;

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::channel_error;
use rabbit_backoff_runtime::transport::{
    Channel, Confirm, Delivery, PendingConfirm, Publication, TransportError,
};

use super::marker::Flag;
use super::pass_queue::{ack, marker_queue, ready, sentinel_of};

/// Copies in flight before the pass waits for confirmations: a killed
/// rotation can leave this many duplicates (copies confirmed whose original
/// was not yet acked), plus one batch.
const IN_FLIGHT: usize = 250;

/// Copies sent together (small enough for `join_all` to poll them in order).
const BATCH: usize = 25;

/// A rotation under way.
pub(super) struct Rotation {
    /// Its sentinel's id.
    pub(super) id: String,
    /// Its flag in the marker queue.
    pub(super) flag: Flag,
    /// Originals in the order they were delivered, each with the
    /// confirmation of its copy still to come (none: it was replayed or
    /// discarded, and waits only for those before it).
    in_flight: VecDeque<(Option<PendingConfirm>, Delivery)>,
    /// The sentinel once the rotation came round to it, unacknowledged
    /// until every original before it is settled: acking it first would
    /// let a pass killed in between leave the rest of the queue in front of
    /// the copies with nothing to say where the copies start.
    pub(super) sentinel: Option<Delivery>,
    /// The most originals the rotation may have acked in all (none: no
    /// limit): each ack lets a consumer with a prefetch be sent one more.
    pub(super) ack_limit: Option<usize>,
    /// Originals acked so far.
    pub(super) acked: usize,
    /// Originals not yet sent, in order, each with whether it is kept
    /// (copied to the back); sent together once there are [`BATCH`].
    batch: Vec<(Delivery, bool)>,
}

impl Rotation {
    /// A rotation behind the sentinel `id`, its flag raised.
    pub(super) fn new(id: String, flag: Flag) -> Rotation {
        Rotation {
            id,
            flag,
            in_flight: VecDeque::new(),
            batch: Vec::new(),
            sentinel: None,
            ack_limit: None,
            acked: 0,
        }
    }

    /// Publishes a copy of `delivery` to the back of the queue (in a batch
    /// with the next ones); its original is acked once the copy is confirmed.
    pub(super) async fn rotate(
        &mut self,
        channel: &dyn Channel,
        queue: &str,
        delivery: Delivery,
    ) -> Result<(), Error> {
        self.queue_up(channel, queue, delivery, true).await
    }

    /// Acks an original that was replayed or discarded, in its turn: after
    /// the copies of the messages before it are confirmed, so that one
    /// multiple ack never covers a message whose copy is still to come.
    pub(super) async fn settle(
        &mut self,
        channel: &dyn Channel,
        queue: &str,
        original: Delivery,
    ) -> Result<(), Error> {
        self.queue_up(channel, queue, original, false).await
    }

    /// Adds `delivery` to the batch, `kept` (a copy goes to the back) or
    /// not, and sends the batch once it is full.
    async fn queue_up(
        &mut self,
        channel: &dyn Channel,
        queue: &str,
        delivery: Delivery,
        kept: bool,
    ) -> Result<(), Error> {
        self.batch.push((delivery, kept));
        if self.batch.len() >= BATCH {
            self.flush(channel, queue).await?;
        }
        Ok(())
    }

    /// Sends the batch's copies, in order, each frame queued before the next
    /// (`join_all` polls a batch this small in order), without waiting for
    /// each to be written in turn.
    pub(super) async fn flush(&mut self, channel: &dyn Channel, queue: &str) -> Result<(), Error> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        let sends = batch.iter().filter(|(_, kept)| *kept).map(|(delivery, _)| {
            channel.send(Publication::new(
                "",
                queue,
                &delivery.data,
                delivery.properties.clone(),
            ))
        });
        let mut pending = join_all(sends).await.into_iter();
        for (delivery, kept) in batch {
            let confirm = if kept {
                let sent = pending.next().expect("one send per kept message");
                Some(sent.map_err(channel_error(queue, "moving a dead letter to the back"))?)
            } else {
                None
            };
            self.in_flight.push_back((confirm, delivery));
        }
        self.drain(queue, IN_FLIGHT).await
    }

    /// Waits for confirmations until at most `left` originals are in flight
    /// (or the ack limit is reached), then acks the originals whose copies
    /// the broker confirmed, with one multiple ack (their tags are the
    /// oldest the channel holds).
    async fn drain(&mut self, queue: &str, left: usize) -> Result<(), Error> {
        let mut confirmed = Vec::new();
        let mut refused = None;
        while self.in_flight.len() > left
            && self
                .ack_limit
                .is_none_or(|limit| self.acked + confirmed.len() < limit)
        {
            let (pending, original) = self.in_flight.pop_front().expect("non-empty");
            if let Some(pending) = pending {
                let confirm = pending
                    .await
                    .map_err(channel_error(queue, "moving a dead letter to the back"))?;
                if confirm != Confirm::Ack {
                    // The original stays unacked, and returns when the channel closes.
                    refused = Some(confirm);
                    break;
                }
            }
            confirmed.push(original);
        }
        if let Some(last) = confirmed.last() {
            last.acker
                .ack_multiple()
                .await
                .map_err(channel_error(queue, "acknowledging moved dead letters"))?;
            self.acked += confirmed.len();
        }
        match refused {
            None => Ok(()),
            Some(confirm) => Err(Error::Channel {
                action: "moving a dead letter to the back",
                queue: queue.to_owned(),
                source: TransportError::Other(format!(
                    "the broker did not take the copy ({confirm:?})"
                )),
            }),
        }
    }

    /// Sends what is batched and waits for every confirmation.
    pub(super) async fn complete(
        &mut self,
        channel: &dyn Channel,
        queue: &str,
    ) -> Result<(), Error> {
        self.flush(channel, queue).await?;
        self.drain(queue, 0).await
    }

    /// Ends a rotation that came round (or a restore that reached the old
    /// sentinel): settles every original, then acks the sentinel, lowers
    /// the flag and deletes the marker queue, in that order, so that until
    /// the flag is lowered what is left in the queue tells the next pass
    /// what to do. On a failure the flag's channel closes: the flag is
    /// ready again for the next pass.
    pub(super) async fn end(mut self, channel: &dyn Channel, queue: &str) -> Result<(), Error> {
        let settled = async {
            self.complete(channel, queue).await?;
            match self.sentinel.take() {
                Some(sentinel) => ack(&sentinel, queue).await,
                None => Ok(()),
            }
        }
        .await;
        if let Err(e) = settled {
            self.flag.channel.close().await;
            return Err(e);
        }
        let marker = marker_queue(queue);
        self.flag.lower(&marker).await?;
        channel
            .delete_queue(&marker)
            .await
            .map_err(channel_error(&marker, "deleting the pass's marker queue"))
    }
}

/// Puts right the rotation a killed pass left: moves every message before
/// its sentinel behind the copies that pass made, which is where they were,
/// then drops the sentinel and the flag. Takes messages one by one with
/// `basic.get`, so that none past the sentinel is taken.
pub(super) async fn restore(channel: &dyn Channel, queue: &str, flag: Flag) -> Result<(), Error> {
    tracing::warn!("{queue}: a pass over this queue was interrupted; putting its order right");
    let depth = ready(channel, queue).await?;
    let mut rotation = Rotation::new(String::new(), flag);
    let mut moved = 0;
    // Without a sentinel (the pass died before publishing it), a whole round
    // leaves the order as it was.
    while moved < depth {
        let Some(delivery) = channel
            .get(queue)
            .await
            .map_err(channel_error(queue, "reading the dead-letter queue"))?
        else {
            break;
        };
        if sentinel_of(&delivery).is_some() {
            rotation.sentinel = Some(delivery);
            break;
        }
        rotation.rotate(channel, queue, delivery).await?;
        moved += 1;
    }
    rotation.end(channel, queue).await?;
    tracing::info!("{queue}: order restored ({moved} messages moved back)");
    Ok(())
}
