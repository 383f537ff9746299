//! One pass over a dead-letter queue that never holds more than a bounded
//! window of messages unacknowledged, so that a million dead letters can be
//! read without filling the broker's memory with unacked messages or
//! counting toward a quorum queue's delivery limit.
//!
//! A pass starts by **holding**: it consumes with a prefetch of [`WINDOW`]
//! and leaves the messages it keeps unacknowledged; closing the channel puts
//! them back at their places (a classic queue keeps its order). A pass that
//! ends within the window (a small queue, or a limited peek that found what
//! it looked for) writes nothing.
//!
//! A pass that needs more than the window, and every pass on a quorum queue
//! (which puts returned messages at its back and counts every return toward
//! its delivery limit), **rotates**: it puts a sentinel message behind the
//! last dead letter, then publishes a copy of each message it keeps to the
//! back of the queue and acks the original once the broker confirmed the
//! copy, until the sentinel comes round. A full rotation leaves the queue in
//! its order. The originals are acked in delivery order, each run of
//! confirmed ones with one multiple ack (a message replayed or discarded
//! meanwhile waits its turn), so that an ack never covers a message whose
//! copy is still to come.
//!
//! A consumer is handed up to its prefetch of messages ahead, so near its
//! end a rotation is also handed copies from behind the sentinel. A classic
//! queue puts those back at their places when the channel closes. A quorum
//! queue would put them at its back and count each toward its delivery
//! limit, so on a quorum queue the consumer is never sent more than the
//! messages before the sentinel: the pass counts the ready messages just
//! before it publishes its sentinel (`total`), consumes with a prefetch of
//! at most [`CREDIT`] and `total + 1`, and acks originals only so far that
//! `acked + prefetch` stays within the sentinel's place (at least `total +
//! 1`, and past every message received). The broker can then send the
//! sentinel last, and nothing behind it; once the pass has received all it
//! may and no sentinel, someone published before the sentinel after the
//! count, and the pass acks one more at a time. At its sentinel it cancels
//! the consumer, and only then acks the rest.
//!
//! Only if someone else takes messages from the queue meanwhile is the
//! consumer sent messages from behind the sentinel (as many as were taken).
//! The pass neither returns them (a quorum queue would put them at its
//! back) nor acks them (they are the only copies), but goes **another
//! round**: a new sentinel at the back, a copy of each of them behind it,
//! then every message before the new sentinel with `basic.get`, one at a
//! time (which takes nothing past it), which puts them back at the head in
//! order; the old sentinel is acked only once the new one is in the queue.
//!
//! A consumer rather than `basic.get` on a quorum queue: RabbitMQ answers a
//! channel's gets one after another, each once its queue has taken it, so
//! several gets in flight on one channel (which lapin supports) read no
//! faster than one at a time (1,450 against 1,360 messages/s on 3.10, 710
//! against 820 on 4.3, 5,000 messages), about a sixth of a classic queue's
//! rate, where the bounded consumer reads at the classic rate
//! (PERFORMANCE.md, "Dead-letter passes over a quorum queue").
//!
//! A rotation killed midway leaves the queue rotated: `[rest][sentinel]
//! [copies of the first part]`. So that the next pass can put it right, a
//! rotation first publishes a flag message to a marker queue
//! (`<dead-letter queue>.pass`) and holds it unacknowledged, on a channel of
//! its own that no multiple ack reaches: a dead pass's flag is ready again,
//! and the next pass first moves the rest behind the copies (up to the old
//! sentinel, one `basic.get` at a time so as to take nothing past it),
//! which restores the order, before it starts its own. A rotation that
//! comes round holds its sentinel unacknowledged until every original
//! before it is settled, and lowers its flag last, so that a pass killed at
//! any moment leaves either its sentinel in the queue or the queue in its
//! order (a whole round then changes nothing). The rotation and the repair
//! are in `rotation`, the sentinel's and the flag's messages in `marker`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt};

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{channel_error, confirm_channel};
use rabbit_backoff_runtime::transport::{
    Channel, Connection, Deliveries, Delivery, TransportError,
};

use super::marker::{marked, publish_marker, raise_flag, stale_flag};
use super::pass_queue::{ack, queue_info, ready, sentinel_of};
use super::rotation::{Rotation, restore};
use crate::run_id::run_id;

/// The most messages a pass holds unacknowledged.
pub(crate) const WINDOW: u16 = 1000;

/// The most prefetch of a pass's consumer of a quorum queue: more than a
/// rotation keeps in flight before it acks (250 originals and a batch), so
/// that it acks before the broker stops sending.
pub(crate) const CREDIT: usize = 600;

/// How long a holding pass waits for a message it expects before it checks
/// whether someone else took it.
const IDLE: Duration = Duration::from_secs(2);

/// How long a holding pass, the queue's only consumer, waits for messages
/// the broker has already sent it: nothing ready in the queue does not mean
/// nothing is on its way. RabbitMQ 3.10 re-encodes the headers of a message
/// it dead-lettered each time it delivers it, which takes it seconds for
/// headers nested thousands of levels deep.
const IDLE_ALONE: Duration = Duration::from_secs(120);

enum Phase {
    Hold { held: VecDeque<Delivery> },
    Rotate(Box<Rotation>),
}

/// How long a pass over a quorum queue keeps its channel open after its
/// last ack (see [`Pass::finish`]).
const QUORUM_SETTLE_GRACE: Duration = Duration::from_millis(250);

/// Where a pass takes its messages from.
enum Source {
    /// A consumer with a prefetch of [`WINDOW`] (classic queues).
    Consumer(BoxStream<'static, Result<Delivery, TransportError>>),
    /// A consumer sent no more than the messages up to the sentinel
    /// (quorum queues).
    Credit(Credit),
    /// `basic.get`, one at a time (quorum queues, another round).
    Get,
}

/// A consumer of a quorum queue with a prefetch of at most [`CREDIT`],
/// whose originals the rotation acks only so far that the broker can send
/// nothing past the sentinel: with `acked` acked, it can have sent
/// `acked + prefetch`.
struct Credit {
    deliveries: BoxStream<'static, Result<Delivery, TransportError>>,
    consumer_tag: String,
    prefetch: usize,
    /// Deliveries taken from the consumer.
    received: usize,
}

/// A pass in progress.
pub(crate) struct Pass {
    connection: Arc<dyn Connection>,
    channel: Arc<dyn Channel>,
    queue: String,
    source: Source,
    /// Whether the pass has come round to its sentinel.
    done: bool,
    /// Messages in the queue when the pass started.
    total: usize,
    /// Messages the pass has reached.
    seen: usize,
    phase: Phase,
}

impl Pass {
    /// Starts a pass over `queue`: puts right a rotation a killed pass left,
    /// then starts consuming; `quorum` passes rotate from the start.
    pub(crate) async fn open(
        connection: Arc<dyn Connection>,
        queue: &str,
        quorum: bool,
    ) -> Result<Pass, Error> {
        let channel = confirm_channel(&*connection, queue).await?;
        channel
            .check_queue(queue)
            .await
            .map_err(channel_error(queue, "finding the dead-letter queue"))?;
        if let Some(flag) = stale_flag(&*connection, queue).await? {
            restore(&*channel, queue, flag).await?;
        }
        let total = ready(&*channel, queue).await?;
        let source = if quorum && total > 0 {
            // The sentinel is the last message the consumer can be sent
            // before the rotation acks anything.
            let prefetch = CREDIT.min(total + 1);
            let deliveries = consume(&*channel, queue, prefetch as u16).await?;
            Source::Credit(Credit {
                deliveries: deliveries.stream,
                consumer_tag: deliveries.consumer_tag,
                prefetch,
                received: 0,
            })
        } else if quorum {
            Source::Get
        } else {
            Source::Consumer(consume(&*channel, queue, WINDOW).await?.stream)
        };
        let mut pass = Pass {
            connection,
            channel,
            queue: queue.to_owned(),
            source,
            done: false,
            total,
            seen: 0,
            phase: Phase::Hold {
                held: VecDeque::new(),
            },
        };
        if quorum && total > 0 {
            pass.start_rotation().await?;
        }
        Ok(pass)
    }

    /// Messages in the queue when the pass started.
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// Whether stopping now writes nothing and keeps the order: the pass
    /// still holds every message it kept.
    pub(crate) fn can_stop(&self) -> bool {
        matches!(self.phase, Phase::Hold { .. })
    }

    /// The next message, or `None` once every message that was in the queue
    /// when the pass started has been reached.
    pub(crate) async fn next(&mut self) -> Result<Option<Delivery>, Error> {
        loop {
            if self.done || (self.can_stop() && self.seen >= self.total) {
                return Ok(None);
            }
            let Some(delivery) = self.take().await? else {
                // Someone else took the rest.
                return Ok(None);
            };
            if let Some(seen) = sentinel_of(&delivery) {
                if let Phase::Rotate(rotation) = &mut self.phase
                    && rotation.id == seen
                {
                    // Held until every copy before it is confirmed and its
                    // original acked: a pass killed before then leaves its
                    // sentinel in the queue for the next one to find.
                    rotation.sentinel = Some(delivery);
                    self.done = true;
                    return Ok(None);
                }
                // A sentinel of a pass that died after its order was put
                // right marks nothing any more.
                match &mut self.phase {
                    Phase::Rotate(rotation) => {
                        rotation
                            .settle(&*self.channel, &self.queue, delivery)
                            .await?;
                    }
                    Phase::Hold { .. } => ack(&delivery, &self.queue).await?,
                }
                continue;
            }
            self.seen += 1;
            return Ok(Some(delivery));
        }
    }

    /// The next message from the source; `None` when the queue is empty
    /// and someone else took the rest (a rotating pass's sentinel included).
    async fn take(&mut self) -> Result<Option<Delivery>, Error> {
        let read = channel_error(&self.queue, "reading the dead-letter queue");
        match &mut self.source {
            Source::Get => {
                let got = self.channel.get(&self.queue).await.map_err(read)?;
                Ok(got)
            }
            Source::Credit(credit) => {
                if let Phase::Rotate(rotation) = &mut self.phase {
                    // Nothing is before the sentinel's place: at least
                    // `total` messages, and past all those received.
                    let sentinel = (self.total + 1).max(credit.received + 1);
                    rotation.ack_limit = Some(sentinel - credit.prefetch);
                    if credit.received >= rotation.acked + credit.prefetch {
                        // Sent all it may: release what the limit allows
                        // (one more, if someone published before the sentinel).
                        rotation.complete(&*self.channel, &self.queue).await?;
                    }
                }
                let got =
                    next_delivery(&mut credit.deliveries, &*self.channel, &self.queue).await?;
                credit.received += usize::from(got.is_some());
                Ok(got)
            }
            Source::Consumer(deliveries) => {
                next_delivery(deliveries, &*self.channel, &self.queue).await
            }
        }
    }
}

impl Pass {
    /// Keeps `delivery` in the queue, at its place in the order.
    pub(crate) async fn keep(&mut self, delivery: Delivery) -> Result<(), Error> {
        match &mut self.phase {
            Phase::Hold { held } => {
                held.push_back(delivery);
                if held.len() >= usize::from(WINDOW) {
                    self.start_rotation().await?;
                }
                Ok(())
            }
            Phase::Rotate(rotation) => rotation.rotate(&*self.channel, &self.queue, delivery).await,
        }
    }

    /// Removes `delivery` from the queue (it was replayed or discarded).
    pub(crate) async fn remove(&mut self, delivery: Delivery) -> Result<(), Error> {
        match &mut self.phase {
            Phase::Hold { .. } => ack(&delivery, &self.queue).await,
            Phase::Rotate(rotation) => rotation.settle(&*self.channel, &self.queue, delivery).await,
        }
    }

    /// Ends the pass. A holding pass closes its channel, which puts the
    /// messages it kept back at their places; a rotating one first goes
    /// round to its sentinel. A rotation that fails on the way gives up as
    /// [`abort`](Self::abort) does, and the next pass puts it right.
    pub(crate) async fn finish(mut self) -> Result<(), Error> {
        match self.come_round().await {
            Ok(()) => {
                if !matches!(self.source, Source::Consumer(_)) {
                    // RabbitMQ 4.3 applies the acks of a quorum queue's
                    // `basic.get` messages after the fact: a channel closed
                    // right after them returned up to a fifth of them to
                    // the queue (ready again, at its head), measured with
                    // 300 acks; 100 ms later none. 3.10 applies them first.
                    tokio::time::sleep(QUORUM_SETTLE_GRACE).await;
                }
                self.channel.close().await;
                Ok(())
            }
            Err(e) => {
                self.abort().await;
                Err(e)
            }
        }
    }

    /// Takes a rotation round to its sentinel, and round again for what
    /// gets in flight took past it, and [ends](Rotation::end) it.
    async fn come_round(&mut self) -> Result<(), Error> {
        if !matches!(self.phase, Phase::Rotate(_)) {
            return Ok(());
        }
        loop {
            while let Some(delivery) = self.next().await? {
                self.keep(delivery).await?;
            }
            let past = self.stop_consuming().await?;
            if past.is_empty() {
                break;
            }
            self.round_again(past).await?;
        }
        let Phase::Rotate(rotation) = std::mem::replace(
            &mut self.phase,
            Phase::Hold {
                held: VecDeque::new(),
            },
        ) else {
            unreachable!("rotating")
        };
        rotation.end(&*self.channel, &self.queue).await
    }

    /// Cancels a consumer of a quorum queue once at its sentinel (or once
    /// the queue is empty): returns what it was sent past it, and lifts the
    /// rotation's ack limit.
    async fn stop_consuming(&mut self) -> Result<Vec<Delivery>, Error> {
        let Source::Credit(credit) = std::mem::replace(&mut self.source, Source::Get) else {
            return Ok(Vec::new());
        };
        let Credit {
            mut deliveries,
            consumer_tag,
            ..
        } = credit;
        self.channel
            .cancel(&consumer_tag)
            .await
            .map_err(channel_error(&self.queue, "stopping the pass's consumer"))?;
        // The deliveries before the cancel's answer have arrived with it.
        let mut past = Vec::new();
        while let Some(Some(delivery)) = deliveries.next().now_or_never() {
            past.push(
                delivery.map_err(channel_error(&self.queue, "reading the dead-letter queue"))?,
            );
        }
        if let Phase::Rotate(rotation) = &mut self.phase {
            rotation.ack_limit = None;
        }
        Ok(past)
    }

    /// Puts `past`, sent from behind the sentinel (someone else took
    /// messages before it meanwhile), back at the head of the queue, in
    /// order: a new sentinel at the back, then their copies behind it, then
    /// another round up to the new sentinel, one `basic.get` at a time. The
    /// old sentinel is acked in its turn, after the new one is in the queue.
    async fn round_again(&mut self, past: Vec<Delivery>) -> Result<(), Error> {
        tracing::info!(
            "{}: {} messages were sent from past the sentinel (someone else took some before it); going round again",
            self.queue,
            past.len()
        );
        let Phase::Rotate(rotation) = &mut self.phase else {
            unreachable!("rotating")
        };
        // The copies still batched belong before the new sentinel.
        rotation.flush(&*self.channel, &self.queue).await?;
        let id = run_id();
        publish_marker(&*self.channel, &self.queue, marked(&id, "sentinel")).await?;
        rotation.id = id;
        if let Some(old) = rotation.sentinel.take() {
            rotation.settle(&*self.channel, &self.queue, old).await?;
        }
        for delivery in past {
            if sentinel_of(&delivery).is_some() {
                rotation
                    .settle(&*self.channel, &self.queue, delivery)
                    .await?;
            } else {
                rotation
                    .rotate(&*self.channel, &self.queue, delivery)
                    .await?;
            }
        }
        self.done = false;
        Ok(())
    }

    /// Gives up: closing the channel returns every message not yet settled
    /// (a rotation under way is put right by the next pass, as its flag
    /// returns with its channel).
    pub(crate) async fn abort(self) {
        self.channel.close().await;
        if let Phase::Rotate(rotation) = self.phase {
            rotation.flag.channel.close().await;
        }
    }

    /// Switches from holding to rotating: the flag, then the sentinel behind
    /// the last message, then the messages held so far, in order.
    async fn start_rotation(&mut self) -> Result<(), Error> {
        let id = run_id();
        let flag = raise_flag(&*self.connection, &self.queue, &id).await?;
        publish_marker(&*self.channel, &self.queue, marked(&id, "sentinel")).await?;
        let Phase::Hold { held } = std::mem::replace(
            &mut self.phase,
            Phase::Rotate(Box::new(Rotation::new(id, flag))),
        ) else {
            unreachable!("holding")
        };
        let Phase::Rotate(rotation) = &mut self.phase else {
            unreachable!("rotating")
        };
        for delivery in held {
            rotation
                .rotate(&*self.channel, &self.queue, delivery)
                .await?;
        }
        Ok(())
    }
}

/// Whether a pass, idle for `idle`, should take it that the
/// messages it has not reached were taken by someone else: none is ready,
/// and either another consumer is attached or the wait has been long.
async fn taken_by_others(
    channel: &dyn Channel,
    queue: &str,
    idle: Duration,
) -> Result<bool, Error> {
    let info = queue_info(channel, queue).await?;
    Ok(info.messages == 0 && (info.consumers > 1 || idle >= IDLE_ALONE))
}

/// The consumer's next delivery; `None` when the queue is empty and someone
/// else took the rest.
async fn next_delivery(
    deliveries: &mut BoxStream<'static, Result<Delivery, TransportError>>,
    channel: &dyn Channel,
    queue: &str,
) -> Result<Option<Delivery>, Error> {
    let mut idle = Duration::ZERO;
    loop {
        match tokio::time::timeout(IDLE, deliveries.next()).await {
            Err(_) => {
                idle += IDLE;
                if taken_by_others(channel, queue, idle).await? {
                    return Ok(None);
                }
            }
            Ok(None) => {
                return Err(Error::Channel {
                    action: "reading the dead-letter queue",
                    queue: queue.to_owned(),
                    source: TransportError::Closed("the consumer was cancelled".into()),
                });
            }
            Ok(Some(delivery)) => {
                return delivery
                    .map(Some)
                    .map_err(channel_error(queue, "reading the dead-letter queue"));
            }
        }
    }
}

/// Consumes `queue` on `channel` with a prefetch of `prefetch`.
async fn consume(channel: &dyn Channel, queue: &str, prefetch: u16) -> Result<Deliveries, Error> {
    channel
        .qos(prefetch)
        .await
        .map_err(channel_error(queue, "setting the prefetch window"))?;
    channel
        .consume(queue)
        .await
        .map_err(channel_error(queue, "reading the dead-letter queue"))
}
