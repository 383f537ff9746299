//! Coalesced acknowledgements for one consumer's channel.
//!
//! A finished delivery is not acknowledged on its own: its tag waits, and
//! once [`batch`](Acks::new) tags wait, one `basic.ack` with `multiple`
//! acknowledges the longest run of finished tags from the oldest delivery
//! the channel still holds. A delivery still being handled, or whose copy
//! awaits the broker's confirm, ends the run: a multiple ack never covers
//! it. Finished tags after it wait for it to finish and join its run;
//! when the consumer's loop finds nothing else being handled it flushes
//! at once (no delivery can join the run, and the broker may be waiting
//! for these acks to send more); when the prefetch window is full and no
//! handler is ready to finish, it acknowledges the run from the oldest
//! ([`flush_run`](Acks::flush_run): the broker sends nothing until acks go
//! out, so waiting for the batch only stalls it); when it sees tags waiting longer than its linger
//! ([`ACK_LINGER`]), the run is acknowledged, and those held back for that
//! long are acknowledged one by one (all sent before waiting for any to be
//! written), so that a slow message never holds the
//! others (and the prefetch window) back for longer. (Acknowledging them
//! one by one as soon as a batch of them waits cost more than it saved:
//! see PERFORMANCE.md, "Coalesced acknowledgements".)
//!
//! A requeue or a reject flushes what waits first, then goes out (a failed
//! delivery under delayed retries goes out alone, see
//! [`fail`](Acks::fail)); until it
//! has gone out its tag ends every run, so no multiple ack covers a tag
//! the broker has still to see nacked. Acknowledgements and nacks go out one
//! flush at a time, in the order they were planned.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use crate::transport::{Acker, Modification, TransportError};

/// How long a finished delivery may wait for others to be acknowledged
/// with it (see PERFORMANCE.md, "Coalesced acknowledgements").
pub(crate) const ACK_LINGER: Duration = Duration::from_millis(5);

/// Where one delivery of the channel stands.
enum Slot {
    /// Being handled, its copy awaiting confirm, or its nack on its way.
    Open,
    /// Finished: acknowledged with the next flush.
    Finished(Acker),
    /// Acknowledged or nacked already; passed over by a run.
    Settled,
}

#[derive(Default)]
struct Ledger {
    /// The channel's deliveries not yet passed by a run, by tag, ascending.
    slots: VecDeque<(u64, Slot)>,
    /// How many of them are [`Slot::Finished`].
    finished: usize,
    /// Since when finished deliveries wait behind an open one.
    held_since: Option<tokio::time::Instant>,
}

/// What a flush acknowledges besides the run from the oldest delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// None of those held back by an open delivery: it takes them into its
    /// run once it finishes.
    None,
    /// Those that have been held back for [`ACK_LINGER`] already.
    Lingering,
    /// All of them.
    All,
}

impl Ledger {
    fn position(&self, tag: u64) -> Option<usize> {
        self.slots.binary_search_by_key(&tag, |(t, _)| *t).ok()
    }

    /// Takes the longest run of finished deliveries from the oldest,
    /// acknowledged by its last with `multiple`; and, as `held` says, those
    /// that wait after an open one, each on its own.
    fn take(&mut self, held: Held) -> Flush {
        let mut flush = Flush::default();
        while let Some((_, slot)) = self.slots.front() {
            if matches!(slot, Slot::Open) {
                break;
            }
            if let Some((_, Slot::Finished(acker))) = self.slots.pop_front() {
                self.finished -= 1;
                flush.run = Some(acker);
            }
        }
        let now = tokio::time::Instant::now();
        let singles = match held {
            Held::None => false,
            Held::Lingering => self
                .held_since
                .is_some_and(|since| now.duration_since(since) >= ACK_LINGER),
            Held::All => true,
        };
        if !singles {
            if self.finished == 0 {
                self.held_since = None;
            } else {
                self.held_since.get_or_insert(now);
            }
            return flush;
        }
        for (_, slot) in self.slots.iter_mut() {
            if let Slot::Finished(_) = slot
                && let Slot::Finished(acker) = std::mem::replace(slot, Slot::Settled)
            {
                flush.singles.push(acker);
            }
        }
        self.finished = 0;
        self.held_since = None;
        flush
    }
}

/// One flush: a multiple ack of a run, and single acks.
#[derive(Default)]
struct Flush {
    run: Option<Acker>,
    singles: Vec<Acker>,
}

impl Flush {
    async fn send(self) {
        // Every frame is queued, in order, as its future is first polled:
        // one wait for all of them, not one each.
        let run = async {
            if let Some(last) = &self.run {
                report(last.ack_multiple().await);
            }
        };
        let singles = futures_util::future::join_all(self.singles.iter().map(Acker::ack));
        let ((), singles) = futures_util::future::join(run, singles).await;
        singles.into_iter().for_each(report);
    }
}

fn report(acked: Result<(), TransportError>) {
    if let Err(e) = acked {
        tracing::warn!("not acked ({e}); the broker will redeliver the message");
    }
}

/// The coalesced acknowledgements of one channel's deliveries.
pub(crate) struct Acks {
    ledger: Mutex<Ledger>,
    /// Held while a flush or a nack goes out, so that they go out in the
    /// order they were planned.
    sending: tokio::sync::Mutex<()>,
    batch: usize,
}

impl Acks {
    /// Acknowledgements flushed once `batch` deliveries have finished.
    pub(crate) fn new(batch: usize) -> Self {
        Acks {
            ledger: Mutex::default(),
            sending: tokio::sync::Mutex::new(()),
            batch: batch.max(1),
        }
    }

    /// The acknowledgements of a channel with `prefetch`: flushed once half
    /// the prefetch window has finished, so that the broker keeps sending
    /// while they wait (see PERFORMANCE.md, "Coalesced acknowledgements").
    pub(crate) fn for_prefetch(prefetch: u16) -> Self {
        Acks::new(usize::from(prefetch / 2).max(1))
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a delivery as the channel hands it out, in tag order.
    pub(crate) fn received(&self, tag: u64) {
        let mut ledger = self.ledger();
        if ledger.slots.back().is_none_or(|(last, _)| *last < tag) {
            ledger.slots.push_back((tag, Slot::Open));
        }
    }

    /// How many finished deliveries wait to be acknowledged.
    pub(crate) fn waiting(&self) -> usize {
        self.ledger().finished
    }

    /// The delivery is finished: it is acknowledged with the next flush,
    /// which this call makes when the batch is full. A delivery that was
    /// never [`received`](Self::received) is acknowledged at once.
    pub(crate) async fn ack(&self, acker: Acker) {
        let unknown = {
            let mut ledger = self.ledger();
            match ledger.position(acker.delivery_tag()) {
                Some(at) => {
                    ledger.slots[at].1 = Slot::Finished(acker);
                    ledger.finished += 1;
                    if ledger.finished < self.batch {
                        return;
                    }
                    None
                }
                None => Some(acker),
            }
        };
        match unknown {
            // Once a batch: on the heap, so that every delivery's future
            // does not carry a flush's room. Those held back by an open
            // delivery wait for it (or for the linger).
            None => Box::pin(self.send(Held::None)).await,
            Some(acker) => report(acker.ack().await),
        }
    }

    /// Whether the oldest delivery the channel holds has finished, so that
    /// [`flush_run`](Self::flush_run) would acknowledge something.
    pub(crate) fn run_ready(&self) -> bool {
        self.ledger()
            .slots
            .iter()
            .find(|(_, slot)| !matches!(slot, Slot::Settled))
            .is_some_and(|(_, slot)| matches!(slot, Slot::Finished(_)))
    }

    /// Acknowledges the run of finished deliveries from the oldest now;
    /// those held back by an open delivery wait for it to finish.
    pub(crate) async fn flush_run(&self) {
        self.send(Held::None).await;
    }

    /// Acknowledges every finished delivery now.
    pub(crate) async fn flush(&self) {
        self.send(Held::All).await;
    }

    /// Acknowledges what finished and lingered: the run from the oldest,
    /// and those held back by an open delivery for [`ACK_LINGER`] or more
    /// (an open one that finishes soon takes them into its run).
    pub(crate) async fn flush_lingering(&self) {
        self.send(Held::Lingering).await;
    }

    /// Acknowledges the run from the oldest, and those held back as `held` says.
    async fn send(&self, held: Held) {
        let _sending = self.sending.lock().await;
        let flush = self.ledger().take(held);
        flush.send().await;
    }

    /// Returns the delivery to its queue (`requeue`) or rejects it into the
    /// dead-letter exchange, after acknowledging what finished before.
    pub(crate) async fn nack(&self, acker: &Acker, requeue: bool) -> Result<(), TransportError> {
        let back = if requeue { Back::Requeue } else { Back::Reject };
        self.settle_back(acker, back).await
    }

    /// Returns the delivery to its queue as a failed delivery
    /// (`basic.reject` with requeue, see [`Acker::fail`]), after
    /// acknowledging what finished before.
    pub(crate) async fn fail(&self, acker: &Acker) -> Result<(), TransportError> {
        self.settle_back(acker, Back::Fail).await
    }

    /// Settles the delivery as `modified` (see
    /// [`Acker::modify`]): held back, or dead-lettered, by its queue. Like
    /// [`fail`](Self::fail), without acknowledging first what finished
    /// before; its tag stays open until the settlement has gone out.
    pub(crate) async fn modify(
        &self,
        acker: &Acker,
        modification: Modification,
    ) -> Result<(), TransportError> {
        let modified = acker.modify(modification).await;
        self.settled(acker.delivery_tag());
        modified
    }

    async fn settle_back(&self, acker: &Acker, back: Back) -> Result<(), TransportError> {
        // A failed delivery under delayed retries waits in its queue, so
        // nothing is gained by acknowledging first what finished before it,
        // nor by waiting for another flush or reject to go out: when most
        // messages fail once, a flush per failure would undo the coalescing,
        // and rejects one at a time would each wait for the one before. Its
        // tag stays open until the reject has gone out, so no multiple ack
        // covers it before.
        let _sending = match back {
            Back::Fail => None,
            Back::Requeue | Back::Reject => {
                let sending = self.sending.lock().await;
                let flush = self.ledger().take(Held::All);
                flush.send().await;
                Some(sending)
            }
        };
        let tag = acker.delivery_tag();
        let nacked = match back {
            Back::Requeue => acker.requeue().await,
            Back::Reject => acker.reject().await,
            Back::Fail => acker.fail().await,
        };
        self.settled(tag);
        nacked
    }

    /// Marks the delivery of `tag` settled otherwise than by an ack.
    fn settled(&self, tag: u64) {
        let mut ledger = self.ledger();
        if let Some(at) = ledger.position(tag) {
            ledger.slots[at].1 = Slot::Settled;
        }
    }
}

/// How a delivery goes back to the broker unacknowledged.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Back {
    /// `basic.nack` with requeue.
    Requeue,
    /// `basic.nack` without requeue: dead-lettered by its queue.
    Reject,
    /// `basic.reject` with requeue: a failed delivery.
    Fail,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures_util::future::BoxFuture;

    use super::*;
    use crate::transport::Settle;

    /// What a channel was sent, in order.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Sent {
        Ack { tag: u64, multiple: bool },
        Nack { tag: u64, requeue: bool },
        Fail { tag: u64 },
    }

    #[derive(Clone, Default)]
    struct Wire(Arc<Mutex<Vec<Sent>>>);

    impl Wire {
        fn acker(&self, tag: u64) -> Acker {
            Acker::new(Recorded {
                tag,
                wire: self.clone(),
                written: None,
            })
        }

        /// An acker whose acks are recorded at once and written only when
        /// `written` lets them be (as lapin's I/O thread does later).
        fn gated(&self, tag: u64, written: &Arc<tokio::sync::Semaphore>) -> Acker {
            Acker::new(Recorded {
                tag,
                wire: self.clone(),
                written: Some(Arc::clone(written)),
            })
        }

        fn sent(&self) -> Vec<Sent> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    struct Recorded {
        tag: u64,
        wire: Wire,
        /// Holds each ack until the test lets it be written.
        written: Option<Arc<tokio::sync::Semaphore>>,
    }

    impl Settle for Recorded {
        fn delivery_tag(&self) -> u64 {
            self.tag
        }

        fn ack(&self, multiple: bool) -> BoxFuture<'_, Result<(), TransportError>> {
            self.wire.0.lock().unwrap().push(Sent::Ack {
                tag: self.tag,
                multiple,
            });
            Box::pin(async move {
                if let Some(written) = &self.written {
                    written.acquire().await.expect("open").forget();
                }
                Ok(())
            })
        }

        fn nack(&self, requeue: bool) -> BoxFuture<'_, Result<(), TransportError>> {
            let sent = Sent::Nack {
                tag: self.tag,
                requeue,
            };
            Box::pin(async move {
                self.wire.0.lock().unwrap().push(sent);
                Ok(())
            })
        }

        fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>> {
            let sent = Sent::Fail { tag: self.tag };
            Box::pin(async move {
                self.wire.0.lock().unwrap().push(sent);
                Ok(())
            })
        }
    }

    /// Those held back go out together: the flush does not wait for one to
    /// be written before sending the next (each wait is a round trip to the
    /// connection's I/O thread, which cost S4 a quarter of its CPU).
    #[tokio::test]
    async fn a_flush_sends_every_ack_before_waiting_for_any() {
        let wire = Wire::default();
        let written = Arc::new(tokio::sync::Semaphore::new(0));
        let acks = Arc::new(acks(10, 1..=6));
        for tag in [1, 2, 4, 5, 6] {
            acks.ack(wire.gated(tag, &written)).await;
        }
        let flush = tokio::spawn({
            let acks = Arc::clone(&acks);
            async move { acks.flush().await }
        });
        tokio::task::yield_now().await;
        assert_eq!(
            wire.sent(),
            [multiple(2), single(4), single(5), single(6)],
            "all sent while none is written yet"
        );
        assert!(!flush.is_finished());
        written.add_permits(4);
        flush.await.expect("the flush ends");
        assert_eq!(acks.waiting(), 0);
    }

    fn acks(batch: usize, tags: std::ops::RangeInclusive<u64>) -> Acks {
        let acks = Acks::new(batch);
        for tag in tags {
            acks.received(tag);
        }
        acks
    }

    const fn multiple(tag: u64) -> Sent {
        Sent::Ack {
            tag,
            multiple: true,
        }
    }

    const fn single(tag: u64) -> Sent {
        Sent::Ack {
            tag,
            multiple: false,
        }
    }

    #[tokio::test]
    async fn a_full_batch_is_one_multiple_ack_of_its_last_tag() {
        let wire = Wire::default();
        let acks = acks(3, 1..=6);
        for tag in 1..=2 {
            acks.ack(wire.acker(tag)).await;
        }
        assert_eq!(wire.sent(), [], "the batch is not full");
        assert_eq!(acks.waiting(), 2);
        acks.ack(wire.acker(3)).await;
        assert_eq!(wire.sent(), [multiple(3)]);
        assert_eq!(acks.waiting(), 0);
    }

    #[tokio::test]
    async fn out_of_order_finishes_ack_the_run_before_the_open_tag_and_the_rest_wait_for_it() {
        let wire = Wire::default();
        let acks = acks(4, 1..=8);
        for tag in [2, 1, 4, 5] {
            acks.ack(wire.acker(tag)).await;
        }
        // 3 is still open: 1–2 go as a run; 4 and 5 wait for it.
        assert_eq!(wire.sent(), [multiple(2)]);
        assert_eq!(acks.waiting(), 2);
        acks.ack(wire.acker(3)).await;
        acks.ack(wire.acker(6)).await;
        // A batch again: 3's run takes 4 to 6.
        assert_eq!(wire.sent(), [multiple(6)]);
        assert_eq!(acks.waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn those_held_back_by_an_open_tag_are_acked_singly_once_they_linger() {
        let wire = Wire::default();
        let acks = acks(3, 1..=5);
        for tag in [2, 3, 4] {
            acks.ack(wire.acker(tag)).await;
        }
        // 1 is open: a full batch waits behind it.
        assert_eq!(wire.sent(), []);
        acks.flush_lingering().await;
        assert_eq!(wire.sent(), [], "held back for no time yet");
        tokio::time::advance(ACK_LINGER).await;
        acks.flush_lingering().await;
        assert_eq!(wire.sent(), [single(2), single(3), single(4)]);
        acks.ack(wire.acker(1)).await;
        acks.ack(wire.acker(5)).await;
        acks.flush().await;
        // 1's run passes those acked already.
        assert_eq!(wire.sent(), [multiple(5)]);
    }

    #[tokio::test]
    async fn a_run_flush_acks_the_run_from_the_oldest_and_leaves_those_held_back() {
        let wire = Wire::default();
        let acks = acks(10, 1..=6);
        acks.ack(wire.acker(2)).await;
        assert!(!acks.run_ready(), "1 is open: no run starts at the oldest");
        acks.ack(wire.acker(1)).await;
        acks.ack(wire.acker(4)).await;
        assert!(acks.run_ready());
        acks.flush_run().await;
        assert_eq!(wire.sent(), [multiple(2)], "4 waits for 3");
        assert!(!acks.run_ready(), "3 is open now");
        assert_eq!(acks.waiting(), 1);
        acks.nack(&wire.acker(3), true).await.unwrap();
        wire.sent();
        acks.ack(wire.acker(5)).await;
        assert!(acks.run_ready(), "3 is settled: the run starts at 5");
        acks.flush_run().await;
        assert_eq!(wire.sent(), [multiple(5)]);
        assert!(!acks.run_ready(), "6 is open");
    }

    #[tokio::test]
    async fn a_flush_acks_those_held_back_too() {
        let wire = Wire::default();
        let acks = acks(10, 1..=3);
        acks.ack(wire.acker(2)).await;
        acks.ack(wire.acker(3)).await;
        acks.flush().await;
        assert_eq!(wire.sent(), [single(2), single(3)]);
    }

    #[tokio::test]
    async fn a_nack_in_the_middle_of_a_run_goes_after_the_run_before_it_and_is_never_covered() {
        let wire = Wire::default();
        let acks = acks(10, 1..=5);
        acks.ack(wire.acker(1)).await;
        acks.ack(wire.acker(2)).await;
        acks.ack(wire.acker(4)).await;
        acks.nack(&wire.acker(3), true).await.unwrap();
        assert_eq!(
            wire.sent(),
            [
                multiple(2),
                single(4),
                Sent::Nack {
                    tag: 3,
                    requeue: true
                }
            ],
            "what finished before goes first, then the nack"
        );
        acks.ack(wire.acker(5)).await;
        acks.flush().await;
        assert_eq!(
            wire.sent(),
            [multiple(5)],
            "3 is nacked already: 5's run passes it"
        );
    }

    #[tokio::test]
    async fn a_failed_delivery_goes_alone_and_keeps_the_run_waiting() {
        let wire = Wire::default();
        let acks = acks(10, 1..=5);
        acks.ack(wire.acker(1)).await;
        acks.ack(wire.acker(2)).await;
        acks.fail(&wire.acker(3)).await.unwrap();
        assert_eq!(
            wire.sent(),
            [Sent::Fail { tag: 3 }],
            "no flush before it: the run waits for its batch"
        );
        acks.ack(wire.acker(4)).await;
        acks.ack(wire.acker(5)).await;
        acks.flush().await;
        assert_eq!(
            wire.sent(),
            [multiple(5)],
            "one multiple ack passes the rejected tag"
        );
    }

    #[tokio::test]
    async fn a_reject_before_anything_finished_goes_alone() {
        let wire = Wire::default();
        let acks = acks(10, 1..=2);
        acks.nack(&wire.acker(1), false).await.unwrap();
        assert_eq!(
            wire.sent(),
            [Sent::Nack {
                tag: 1,
                requeue: false
            }]
        );
        acks.ack(wire.acker(2)).await;
        acks.flush().await;
        assert_eq!(wire.sent(), [multiple(2)]);
    }

    #[tokio::test]
    async fn a_delivery_never_received_is_acked_at_once() {
        let wire = Wire::default();
        let acks = acks(10, 1..=1);
        acks.ack(wire.acker(7)).await;
        assert_eq!(wire.sent(), [single(7)]);
        acks.flush().await;
        assert_eq!(wire.sent(), []);
    }

    #[tokio::test]
    async fn a_flush_with_nothing_finished_sends_nothing() {
        let wire = Wire::default();
        let acks = acks(10, 1..=3);
        acks.flush().await;
        assert_eq!(wire.sent(), []);
        acks.ack(wire.acker(3)).await;
        acks.flush().await;
        assert_eq!(wire.sent(), [single(3)], "1 and 2 are still open");
    }
}
