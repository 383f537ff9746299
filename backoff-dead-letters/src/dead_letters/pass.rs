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
//! A consumer is handed up to [`WINDOW`] messages ahead, so near its end a
//! rotation is also handed copies from behind the sentinel. A classic queue
//! puts those back at their places when the channel closes; a quorum queue
//! would put them at its back, so on a quorum queue a pass takes messages
//! one at a time with `basic.get`, which takes nothing it does not reach.
//!
//! A rotation killed midway leaves the queue rotated: `[rest][sentinel]
//! [copies of the first part]`. So that the next pass can put it right, a
//! rotation first publishes a flag message to a marker queue
//! (`<dead-letter queue>.pass`) and holds it unacknowledged, on a channel of
//! its own that no multiple ack reaches: a dead pass's
//! flag is ready again, and the next pass first moves the rest behind the
//! copies (up to the old sentinel, with `basic.get` so as to take nothing
//! past it), which restores the order, before it starts its own. A rotation
//! that comes round holds its sentinel unacknowledged until every original
//! before it is settled, and lowers its flag last, so that a pass killed at
//! any moment leaves either its sentinel in the queue or the queue in its
//! order (a whole round then changes nothing).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::join_all;
use futures_util::stream::BoxStream;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use rabbit_backoff_core::{QueueDecl, headers::PASS_SENTINEL};

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{PERSISTENT, channel_error, confirm_channel};
use rabbit_backoff_runtime::transport::{
    Channel, Confirm, Connection, Delivery, NOT_FOUND, PendingConfirm, Publication, QueueInfo,
    TransportError,
};

/// The most messages a pass holds unacknowledged.
pub(crate) const WINDOW: u16 = 1000;

/// Copies in flight before the pass waits for confirmations: a killed
/// rotation can leave this many duplicates (copies confirmed whose original
/// was not yet acked), plus one batch.
const IN_FLIGHT: usize = 250;

/// Copies sent together (small enough for `join_all` to poll them in order).
const BATCH: usize = 25;

/// How long a holding pass waits for a message it expects before it checks
/// whether someone else took it.
const IDLE: Duration = Duration::from_secs(2);

/// How long a holding pass, the queue's only consumer, waits for messages
/// the broker has already sent it: nothing ready in the queue does not mean
/// nothing is on its way. RabbitMQ 3.10 re-encodes the headers of a message
/// it dead-lettered each time it delivers it, which takes it seconds for
/// headers nested thousands of levels deep.
const IDLE_ALONE: Duration = Duration::from_secs(120);

/// How long a pass that finds a marker queue without a ready flag waits for
/// the flag of a pass killed a moment ago to come back.
const FLAG_RETURN: Duration = Duration::from_secs(5);

/// The marker queue of a dead-letter queue.
pub(crate) fn marker_queue(dead_letter_queue: &str) -> String {
    format!("{dead_letter_queue}.pass")
}

/// Whether a queue name is a pass's marker queue (not a consumer's queue).
pub fn is_marker_queue(name: &str) -> bool {
    name.ends_with(".pass")
}

enum Phase {
    Hold { held: VecDeque<Delivery> },
    Rotate(Box<Rotation>),
}

/// A rotation under way.
struct Rotation {
    /// Its sentinel's id.
    id: String,
    /// Its flag in the marker queue.
    flag: Flag,
    /// Originals in the order they were delivered, each with the
    /// confirmation of its copy still to come (none: it was replayed or
    /// discarded, and waits only for those before it).
    in_flight: VecDeque<(Option<PendingConfirm>, Delivery)>,
    /// The sentinel once the rotation came round to it, unacknowledged
    /// until every original before it is settled: acking it first would
    /// let a pass killed in between leave the rest of the queue in front of
    /// the copies with nothing to say where the copies start.
    sentinel: Option<Delivery>,
    /// Originals not yet sent, in order, each with whether it is kept
    /// (copied to the back); sent together once there are [`BATCH`].
    batch: Vec<(Delivery, bool)>,
}

/// A pass's flag in its marker queue, held unacknowledged on a channel of
/// its own, so that the multiple acks of the pass's channel never cover it:
/// it is ready again only if the pass dies.
struct Flag {
    channel: Arc<dyn Channel>,
    delivery: Delivery,
}

impl Flag {
    /// Acks the flag (the rotation is complete) and closes its channel.
    async fn lower(self, marker: &str) -> Result<(), Error> {
        let acked = ack(&self.delivery, marker).await;
        drop(self.delivery);
        self.channel.close().await;
        acked
    }
}

/// How long a pass over a quorum queue keeps its channel open after its
/// last ack (see [`Pass::finish`]).
const QUORUM_SETTLE_GRACE: Duration = Duration::from_millis(250);

/// Where a pass takes its messages from.
enum Source {
    /// A consumer with a prefetch of [`WINDOW`] (classic queues).
    Consumer(BoxStream<'static, Result<Delivery, TransportError>>),
    /// `basic.get`, one at a time (quorum queues).
    Get,
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
        let source = if quorum {
            Source::Get
        } else {
            channel
                .qos(WINDOW)
                .await
                .map_err(channel_error(queue, "setting the prefetch window"))?;
            let deliveries = channel
                .consume(queue)
                .await
                .map_err(channel_error(queue, "reading the dead-letter queue"))?;
            Source::Consumer(deliveries.stream)
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
                ack(&delivery, &self.queue).await?;
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
            Source::Consumer(deliveries) => {
                let mut idle = Duration::ZERO;
                loop {
                    match tokio::time::timeout(IDLE, deliveries.next()).await {
                        Err(_) => {
                            idle += IDLE;
                            if taken_by_others(&*self.channel, &self.queue, idle).await? {
                                return Ok(None);
                            }
                        }
                        Ok(None) => {
                            return Err(Error::Channel {
                                action: "reading the dead-letter queue",
                                queue: self.queue.clone(),
                                source: TransportError::Closed("the consumer was cancelled".into()),
                            });
                        }
                        Ok(Some(delivery)) => {
                            return Ok(Some(delivery.map_err(read)?));
                        }
                    }
                }
            }
        }
    }

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
                if matches!(self.source, Source::Get) {
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

    /// Takes a rotation round to its sentinel and [ends](Rotation::end) it.
    async fn come_round(&mut self) -> Result<(), Error> {
        if !matches!(self.phase, Phase::Rotate(_)) {
            return Ok(());
        }
        while let Some(delivery) = self.next().await? {
            self.keep(delivery).await?;
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
        let id = pass_id();
        let flag = raise_flag(&*self.connection, &self.queue, &id).await?;
        publish_marker(&*self.channel, &self.queue, marked(&id, "sentinel")).await?;
        let Phase::Hold { held } = std::mem::replace(
            &mut self.phase,
            Phase::Rotate(Box::new(Rotation {
                id,
                flag,
                in_flight: VecDeque::new(),
                batch: Vec::new(),
                sentinel: None,
            })),
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

impl Rotation {
    /// Publishes a copy of `delivery` to the back of the queue (in a batch
    /// with the next ones); its original is acked once the copy is confirmed.
    async fn rotate(
        &mut self,
        channel: &dyn Channel,
        queue: &str,
        delivery: Delivery,
    ) -> Result<(), Error> {
        self.batch.push((delivery, true));
        if self.batch.len() >= BATCH {
            self.flush(channel, queue).await?;
        }
        Ok(())
    }

    /// Acks an original that was replayed or discarded, in its turn: after
    /// the copies of the messages before it are confirmed, so that one
    /// multiple ack never covers a message whose copy is still to come.
    async fn settle(
        &mut self,
        channel: &dyn Channel,
        queue: &str,
        original: Delivery,
    ) -> Result<(), Error> {
        self.batch.push((original, false));
        if self.batch.len() >= BATCH {
            self.flush(channel, queue).await?;
        }
        Ok(())
    }

    /// Sends the batch's copies, in order, each frame queued before the next
    /// (`join_all` polls a batch this small in order), without waiting for
    /// each to be written in turn.
    async fn flush(&mut self, channel: &dyn Channel, queue: &str) -> Result<(), Error> {
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

    /// Waits for confirmations until at most `left` originals are in flight,
    /// then acks the originals whose copies the broker confirmed, with one
    /// multiple ack (their tags are the oldest the channel holds).
    async fn drain(&mut self, queue: &str, left: usize) -> Result<(), Error> {
        let mut confirmed = Vec::new();
        let mut refused = None;
        while self.in_flight.len() > left {
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
    async fn complete(&mut self, channel: &dyn Channel, queue: &str) -> Result<(), Error> {
        self.flush(channel, queue).await?;
        self.drain(queue, 0).await
    }

    /// Ends a rotation that came round (or a restore that reached the old
    /// sentinel): settles every original, then acks the sentinel, lowers
    /// the flag and deletes the marker queue, in that order, so that until
    /// the flag is lowered what is left in the queue tells the next pass
    /// what to do. On a failure the flag's channel closes: the flag is
    /// ready again for the next pass.
    async fn end(mut self, channel: &dyn Channel, queue: &str) -> Result<(), Error> {
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

/// The flag a killed rotation left ready in the marker queue, taken
/// (unacknowledged) on a channel of its own, if any.
async fn stale_flag(connection: &dyn Connection, queue: &str) -> Result<Option<Flag>, Error> {
    let marker = marker_queue(queue);
    // The marker queue exists while a pass runs and after one was killed. A
    // killed pass's flag is ready again only once the broker has seen its
    // connection close, which can take a moment after the process died.
    let deadline = tokio::time::Instant::now() + FLAG_RETURN;
    // A passive check of a missing queue closes its channel: use one of its own.
    let probe = confirm_channel(connection, &marker).await?;
    let found = loop {
        match probe.check_queue(&marker).await {
            Ok(info) if info.messages == 0 && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            found => break found,
        }
    };
    match found {
        Ok(info) if info.messages > 0 => {}
        // A pass still running holds its flag (or one killed before raising
        // it left the queue empty): nothing to put right.
        Ok(_) => {
            probe.close().await;
            return Ok(None);
        }
        Err(e) if e.code() == Some(NOT_FOUND) => return Ok(None),
        Err(source) => {
            return Err(Error::Channel {
                action: "checking for an interrupted pass",
                queue: marker,
                source,
            });
        }
    }
    let flag = probe
        .get(&marker)
        .await
        .map_err(channel_error(&marker, "taking an interrupted pass's flag"));
    match flag {
        Ok(Some(delivery)) => Ok(Some(Flag {
            channel: probe,
            delivery,
        })),
        other => {
            probe.close().await;
            other.map(|_| None)
        }
    }
}

/// Puts right the rotation a killed pass left: moves every message before
/// its sentinel behind the copies that pass made, which is where they were,
/// then drops the sentinel and the flag. Takes messages one by one with
/// `basic.get`, so that none past the sentinel is taken.
async fn restore(channel: &dyn Channel, queue: &str, flag: Flag) -> Result<(), Error> {
    tracing::warn!("{queue}: a pass over this queue was interrupted; putting its order right");
    let depth = ready(channel, queue).await?;
    let mut rotation = Rotation {
        id: String::new(),
        flag,
        in_flight: VecDeque::new(),
        batch: Vec::new(),
        sentinel: None,
    };
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

/// Declares the marker queue, publishes the pass's flag to it and takes it
/// back unacknowledged, on a channel of its own: ready again if the pass
/// dies.
async fn raise_flag(connection: &dyn Connection, queue: &str, id: &str) -> Result<Flag, Error> {
    let marker = marker_queue(queue);
    let channel = confirm_channel(connection, &marker).await?;
    let flag = take_flag(&*channel, &marker, id).await;
    match flag {
        Ok(delivery) => Ok(Flag { channel, delivery }),
        Err(e) => {
            channel.close().await;
            Err(e)
        }
    }
}

/// Publishes the flag `id` to the marker queue (declared here) and takes it.
async fn take_flag(channel: &dyn Channel, marker: &str, id: &str) -> Result<Delivery, Error> {
    channel
        .declare_queue(&QueueDecl::new(marker))
        .await
        .map_err(channel_error(marker, "declaring the pass's marker queue"))?;
    publish_marker(channel, marker, marked(id, "flag")).await?;
    let flag = channel
        .get(marker)
        .await
        .map_err(channel_error(marker, "taking the pass's flag"))?
        .ok_or_else(|| Error::Channel {
            action: "taking the pass's flag",
            queue: marker.to_owned(),
            source: TransportError::Other("the flag was not there".into()),
        })?;
    Ok(flag)
}

/// The properties of a pass's sentinel or flag.
fn marked(id: &str, what: &str) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from(PASS_SENTINEL),
        AMQPValue::LongString(LongString::from(id.as_bytes())),
    );
    BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_app_id(ShortString::from("rabbit-backoff"))
        .with_type(ShortString::from(what))
        .with_headers(headers)
}

/// Publishes a sentinel or flag to `queue`, confirmed.
async fn publish_marker(
    channel: &dyn Channel,
    queue: &str,
    properties: BasicProperties,
) -> Result<(), Error> {
    let body: &[u8] = b"rabbit-backoff: a pass over a dead-letter queue is moving its messages \
                        to the back; it stops at this message and removes it.";
    let confirm = channel
        .publish(Publication::new("", queue, body, properties))
        .await
        .map_err(channel_error(queue, "publishing the pass's marker"))?;
    if confirm == Confirm::Ack {
        Ok(())
    } else {
        Err(Error::Channel {
            action: "publishing the pass's marker",
            queue: queue.to_owned(),
            source: TransportError::Other(format!("the broker did not take it ({confirm:?})")),
        })
    }
}

async fn ack(delivery: &Delivery, queue: &str) -> Result<(), Error> {
    delivery
        .acker
        .ack()
        .await
        .map_err(channel_error(queue, "acknowledging a dead letter"))
}

async fn ready(channel: &dyn Channel, queue: &str) -> Result<usize, Error> {
    Ok(queue_info(channel, queue).await?.messages as usize)
}

/// The dead-letter queue's ready messages and consumers.
async fn queue_info(channel: &dyn Channel, queue: &str) -> Result<QueueInfo, Error> {
    channel
        .check_queue(queue)
        .await
        .map_err(channel_error(queue, "counting the dead-letter queue"))
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

/// The pass id of a sentinel or flag.
fn sentinel_of(delivery: &Delivery) -> Option<String> {
    match delivery
        .properties
        .headers()
        .as_ref()?
        .inner()
        .get(PASS_SENTINEL)?
    {
        AMQPValue::LongString(id) => Some(String::from_utf8_lossy(id.as_bytes()).into_owned()),
        _ => None,
    }
}

/// An id unique enough to tell one pass's sentinel, or one index read's end
/// marker, from another's.
pub(crate) fn pass_id() -> String {
    format!(
        "{:016x}{:08x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        fastrand::u32(..)
    )
}
