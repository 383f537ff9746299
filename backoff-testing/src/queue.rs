//! Queues: their messages in order, expiry at the head, overflow,
//! consumers (round robin, prefetch), returns, messages held back (4.3) and
//! dead letters.
//!
//! A queue knows nothing of the broker and channels around it, only what it
//! asks of them: a [`Recipient`] takes its deliveries (a channel, for a
//! consumer or a `basic.get`), and a [`DeadLetterRouter`] takes its dead
//! letters (the broker, through the dead-letter exchange).
//!
//! Every operation runs under the queue's own lock and never awaits. What it
//! dead-letters goes to the router after the lock is released (so a queue
//! never holds its lock while it takes another queue's). Lock order: a
//! queue, then a channel; never the other way round.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rabbit_backoff_core::Argument;
use rabbit_backoff_runtime::transport::{Delivery, QueueInfo, TransportError};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::death::Reason;
use crate::lock::lock;
use crate::queue_config::{Overflow, QueueConfig, QueueKind};
use crate::settlement::Settlement;
use crate::stored_message::Stored;

/// Where a queue hands a message it delivers: the channel of a consumer, or
/// of a `basic.get`.
pub(crate) trait Recipient: Send + Sync {
    /// Under the recipient's own lock (taken while the queue's is held):
    /// when it is open, takes the next message with `take` and makes it a
    /// delivery, unsettled until it comes back through [`Queue::settle`].
    /// `None` when `take` had nothing; the recipient's error when it is
    /// closed (then nothing is taken).
    fn deliver(
        self: Arc<Self>,
        from: &Arc<Queue>,
        consumer: Option<u64>,
        take: &mut dyn FnMut() -> Option<Stored>,
    ) -> Result<Option<Delivery>, TransportError>;
}

/// Where a queue's dead letters go: routed through their queues'
/// dead-letter exchanges, once the queue's lock is released.
pub(crate) trait DeadLetterRouter: Send + Sync {
    /// Routes `dead` (nothing to do when it is empty).
    fn route_dead_letters(&self, dead: Vec<DeadLetter>);
}

/// A message leaving a queue for its dead-letter exchange.
pub(crate) struct DeadLetter {
    pub(crate) message: Stored,
    pub(crate) reason: Reason,
    pub(crate) from: Arc<Queue>,
}

/// One consumer attached to a queue.
pub(crate) struct ConsumerSlot {
    pub(crate) id: u64,
    /// The channel it consumes on.
    pub(crate) recipient: Arc<dyn Recipient>,
    /// At most this many unsettled deliveries (0: no limit).
    pub(crate) prefetch: u16,
    pub(crate) unacked: u32,
    pub(crate) sender: mpsc::UnboundedSender<Result<Delivery, TransportError>>,
}

impl ConsumerSlot {
    fn has_capacity(&self) -> bool {
        self.prefetch == 0 || self.unacked < u32::from(self.prefetch)
    }
}

/// One queue.
pub(crate) struct Queue {
    pub(crate) name: String,
    pub(crate) config: QueueConfig,
    /// The arguments it was declared with, for redeclarations.
    pub(crate) arguments: Vec<(String, Argument)>,
    state: Mutex<QueueState>,
    /// The broker that routes its dead letters; gone with it.
    router: Weak<dyn DeadLetterRouter>,
    /// Wakes the expiry task when the head's deadline moves earlier.
    reaper_wake: Arc<Notify>,
}

#[derive(Default)]
struct QueueState {
    ready: VecDeque<Stored>,
    /// Quorum queues: messages returned by a closing channel (or requeued
    /// with a delivery limit set) are served before `ready`.
    returns: VecDeque<Stored>,
    consumers: Vec<ConsumerSlot>,
    /// Round robin: the consumer to try first.
    cursor: usize,
    /// Deliveries not yet settled, by consumers and `get`.
    unacked: usize,
    next_seq: u64,
    /// Messages in `ready` or `returns` with a deadline.
    with_deadline: usize,
    /// 4.3: messages held back, by when they are delivered again (and their
    /// order of arrival); they then join `returns`.
    held: BTreeMap<(Instant, u64), Stored>,
    reaper: Option<JoinHandle<()>>,
    /// The deadline the expiry task sleeps until.
    reaper_target: Option<Instant>,
}

impl QueueState {
    fn len(&self) -> usize {
        self.ready.len() + self.returns.len()
    }

    fn head(&self) -> Option<&Stored> {
        self.returns.front().or_else(|| self.ready.front())
    }

    fn pop_head(&mut self) -> Option<Stored> {
        let message = match self.returns.pop_front() {
            Some(m) => Some(m),
            None => self.ready.pop_front(),
        }?;
        if message.expires_at.is_some() {
            self.with_deadline -= 1;
        }
        Some(message)
    }

    fn push_back(&mut self, message: Stored) {
        if message.expires_at.is_some() {
            self.with_deadline += 1;
        }
        self.ready.push_back(message);
    }

    fn push_return(&mut self, message: Stored) {
        if message.expires_at.is_some() {
            self.with_deadline += 1;
        }
        self.returns.push_back(message);
    }

    /// Back where it was: before every ready message that came after it.
    fn insert_in_order(&mut self, message: Stored) {
        if message.expires_at.is_some() {
            self.with_deadline += 1;
        }
        let at = self.ready.partition_point(|m| m.seq < message.seq);
        self.ready.insert(at, message);
    }

    /// Moves the messages held back until `now` or earlier to the returns,
    /// in the order of their time.
    fn release_due(&mut self, now: Instant) {
        while let Some(entry) = self.held.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let message = entry.remove();
            self.push_return(message);
        }
    }

    /// When the expiry task must next look: the head's expiry, or the first
    /// held message's time.
    fn next_deadline(&self) -> Option<Instant> {
        let expiry = self.head().and_then(|m| m.expires_at);
        let held = self.held.first_key_value().map(|((at, _), _)| *at);
        match (expiry, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the expiry task has anything to wait for.
    fn waits(&self) -> bool {
        self.with_deadline > 0 || !self.held.is_empty()
    }

    fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// The next consumer in turn with room for one more delivery.
    fn next_consumer(&self) -> Option<usize> {
        let n = self.consumers.len();
        (0..n)
            .map(|i| (self.cursor + i) % n)
            .find(|&i| self.consumers[i].has_capacity())
    }

    fn remove_consumer_at(&mut self, index: usize) -> ConsumerSlot {
        let slot = self.consumers.remove(index);
        if self.cursor > index {
            self.cursor -= 1;
        }
        slot
    }
}

/// What a queue is doing, for [`TestBroker::run_until_idle`](crate::TestBroker::run_until_idle).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Activity {
    pub(crate) ready: usize,
    pub(crate) unacked: usize,
    pub(crate) with_deadline: usize,
    /// Held back (4.3).
    pub(crate) held: usize,
    pub(crate) consumers: usize,
    pub(crate) next_deadline: Option<Instant>,
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Lets the expiry task notice that the queue is gone.
        self.reaper_wake.notify_one();
    }
}

impl Queue {
    pub(crate) fn new(
        name: &str,
        config: QueueConfig,
        arguments: Vec<(String, Argument)>,
        router: Weak<dyn DeadLetterRouter>,
    ) -> Self {
        Queue {
            name: name.to_owned(),
            config,
            arguments,
            state: Mutex::new(QueueState::default()),
            router,
            reaper_wake: Arc::new(Notify::new()),
        }
    }

    /// Hands dead letters to the router (dropped when the broker is gone).
    fn route(&self, dead: Vec<DeadLetter>) {
        if dead.is_empty() {
            return;
        }
        if let Some(router) = self.router.upgrade() {
            router.route_dead_letters(dead);
        }
    }

    /// Ready messages and consumers, after expiring what is due at the head.
    pub(crate) fn info(self: &Arc<Self>) -> QueueInfo {
        let mut dead = Vec::new();
        let info = {
            let mut st = lock(&self.state);
            self.expire_heads(&mut st, Instant::now(), &mut dead);
            self.ensure_reaper(&mut st);
            QueueInfo::new(
                u32::try_from(st.len()).unwrap_or(u32::MAX),
                u32::try_from(st.consumers.len()).unwrap_or(u32::MAX),
            )
        };
        self.route(dead);
        info
    }

    /// Adds a newly published or dead-lettered message. `false`: refused by
    /// `x-overflow = reject-publish`. What it dead-letters (expired or
    /// dropped messages) joins `dead`, for the caller to route.
    pub(crate) fn enqueue(
        self: &Arc<Self>,
        mut message: Stored,
        message_ttl: Option<Duration>,
        now: Instant,
        dead: &mut Vec<DeadLetter>,
    ) -> bool {
        let mut st = lock(&self.state);
        self.expire_heads(&mut st, now, dead);
        if let (Some(max), Overflow::RejectPublish) = (self.config.max_length, self.config.overflow)
            && st.len() >= max
        {
            return false;
        }
        let ttl = match (self.config.message_ttl, message_ttl) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        message.seq = st.next_seq();
        message.expires_at = ttl.map(|ttl| now + ttl);
        st.push_back(message);
        if let Some(max) = self.config.max_length {
            // A message handed straight to a waiting consumer never counts.
            self.dispatch(&mut st, now, dead);
            while st.len() > max {
                if let Some(dropped) = st.pop_head() {
                    dead.push(self.dead_letter(dropped, Reason::Maxlen));
                }
            }
        }
        self.dispatch(&mut st, now, dead);
        true
    }

    /// Attaches a consumer and delivers what it can take.
    pub(crate) fn add_consumer(self: &Arc<Self>, slot: ConsumerSlot) {
        let mut dead = Vec::new();
        {
            let mut st = lock(&self.state);
            st.consumers.push(slot);
            self.dispatch(&mut st, Instant::now(), &mut dead);
        }
        self.route(dead);
    }

    /// Detaches a consumer: its stream ends (with `error` first, if any).
    /// Its unsettled deliveries stay with its channel.
    pub(crate) fn remove_consumer(&self, id: u64, error: Option<TransportError>) {
        let mut st = lock(&self.state);
        if let Some(index) = st.consumers.iter().position(|c| c.id == id) {
            let slot = st.remove_consumer_at(index);
            if let Some(error) = error {
                let _ = slot.sender.send(Err(error));
            }
        }
    }

    /// `basic.get`: the head, after expiring what is due, unsettled.
    pub(crate) fn get(
        self: &Arc<Self>,
        recipient: Arc<dyn Recipient>,
    ) -> Result<Option<Delivery>, TransportError> {
        let mut dead = Vec::new();
        let result = {
            let mut st = lock(&self.state);
            self.expire_heads(&mut st, Instant::now(), &mut dead);
            let result = recipient.deliver(self, None, &mut || st.pop_head());
            if let Ok(Some(_)) = result {
                st.unacked += 1;
            }
            self.ensure_reaper(&mut st);
            result
        };
        self.route(dead);
        result
    }

    /// Settles one delivery of this queue.
    pub(crate) fn settle(
        self: &Arc<Self>,
        consumer: Option<u64>,
        mut message: Stored,
        how: Settlement,
    ) {
        let mut dead = Vec::new();
        {
            let mut st = lock(&self.state);
            st.unacked = st.unacked.saturating_sub(1);
            if let Some(slot) = consumer.and_then(|id| st.consumers.iter_mut().find(|c| c.id == id))
            {
                slot.unacked = slot.unacked.saturating_sub(1);
            }
            let now = Instant::now();
            match (how, self.config.kind) {
                (Settlement::Ack, _) => {}
                (Settlement::Reject, _) => dead.push(self.dead_letter(message, Reason::Rejected)),
                (Settlement::Modify(m), _) if m.undeliverable_here => {
                    dead.push(self.dead_letter(message, Reason::Rejected));
                }
                (_, QueueKind::Classic) => {
                    message.redelivered = true;
                    st.insert_in_order(message);
                }
                (_, QueueKind::Quorum) => {
                    // rabbit_fifo: a failed delivery is counted (3.10
                    // counts every return); over the limit, the message is
                    // dead-lettered. On 4.3 it may be held back. A requeue
                    // with no limit set is re-enqueued at the back;
                    // otherwise (and for a closing channel) it joins the
                    // returns, which are served first.
                    message.redelivered = true;
                    message.acquired_count += 1;
                    if how.counts(&self.config) {
                        message.delivery_count += 1;
                    }
                    let held = how
                        .held_until(&self.config, message.delivery_count, now)
                        .filter(|at| *at > now);
                    match (self.config.delivery_limit, held) {
                        (Some(limit), _) if u64::from(message.delivery_count) > limit => {
                            dead.push(self.dead_letter(message, Reason::DeliveryLimit));
                        }
                        (_, Some(at)) => {
                            let seq = st.next_seq();
                            st.held.insert((at, seq), message);
                        }
                        (None, None) if matches!(how, Settlement::Requeue | Settlement::Fail) => {
                            message.seq = st.next_seq();
                            st.push_back(message);
                        }
                        _ => st.push_return(message),
                    }
                }
            }
            self.dispatch(&mut st, now, &mut dead);
        }
        self.route(dead);
    }

    /// Expires what is due at the head and delivers: the expiry task's step.
    fn reap(self: &Arc<Self>) -> ReaperStep {
        let mut dead = Vec::new();
        let next = {
            let mut st = lock(&self.state);
            self.dispatch(&mut st, Instant::now(), &mut dead);
            if !st.waits() {
                st.reaper = None;
                st.reaper_target = None;
                ReaperStep::Stop
            } else {
                st.reaper_target = st.next_deadline();
                match st.reaper_target {
                    Some(at) => ReaperStep::SleepUntil(at),
                    None => ReaperStep::WaitForWake,
                }
            }
        };
        self.route(dead);
        next
    }

    /// Expires what is due at the head, for a caller that is about to read.
    pub(crate) fn expire_due(self: &Arc<Self>) {
        let mut dead = Vec::new();
        {
            let mut st = lock(&self.state);
            self.dispatch(&mut st, Instant::now(), &mut dead);
        }
        self.route(dead);
    }

    /// The ready messages in delivery order, not consumed.
    pub(crate) fn snapshot(&self) -> Vec<Stored> {
        let st = lock(&self.state);
        st.returns.iter().chain(st.ready.iter()).cloned().collect()
    }

    /// Drops every ready message; how many there were.
    pub(crate) fn purge(&self) -> usize {
        let mut st = lock(&self.state);
        let n = st.len();
        st.ready.clear();
        st.returns.clear();
        st.with_deadline = 0;
        n
    }

    pub(crate) fn activity(&self) -> Activity {
        let st = lock(&self.state);
        Activity {
            ready: st.len(),
            unacked: st.unacked,
            with_deadline: st.with_deadline,
            held: st.held.len(),
            consumers: st.consumers.len(),
            next_deadline: st.next_deadline(),
        }
    }

    fn dead_letter(self: &Arc<Self>, message: Stored, reason: Reason) -> DeadLetter {
        DeadLetter {
            message,
            reason,
            from: Arc::clone(self),
        }
    }

    /// Removes expired messages from the head only: one behind an unexpired
    /// message waits, as in RabbitMQ.
    fn expire_heads(
        self: &Arc<Self>,
        st: &mut QueueState,
        now: Instant,
        dead: &mut Vec<DeadLetter>,
    ) {
        while st
            .head()
            .and_then(|m| m.expires_at)
            .is_some_and(|at| at <= now)
        {
            if let Some(expired) = st.pop_head() {
                dead.push(self.dead_letter(expired, Reason::Expired));
            }
        }
    }

    /// Delivers ready messages, in order, to consumers in turn while they
    /// have room; expires the head first each time.
    fn dispatch(self: &Arc<Self>, st: &mut QueueState, now: Instant, dead: &mut Vec<DeadLetter>) {
        st.release_due(now);
        loop {
            self.expire_heads(st, now, dead);
            if st.len() == 0 {
                break;
            }
            let Some(index) = st.next_consumer() else {
                break;
            };
            let slot = &st.consumers[index];
            let (id, recipient) = (slot.id, Arc::clone(&slot.recipient));
            match recipient.deliver(self, Some(id), &mut || st.pop_head()) {
                Ok(Some(delivery)) => {
                    let slot = &mut st.consumers[index];
                    slot.unacked += 1;
                    // A consumer whose stream was dropped still holds the
                    // delivery, unacknowledged, until its channel closes: as
                    // with a client.
                    let _ = slot.sender.send(Ok(delivery));
                    st.unacked += 1;
                    st.cursor = index + 1;
                }
                Err(_closed) => {
                    st.remove_consumer_at(index);
                }
                Ok(None) => break,
            }
        }
        self.ensure_reaper(st);
    }

    /// Keeps an expiry task running while the queue holds messages with a
    /// deadline, and wakes it when the head's deadline moves earlier. The
    /// task sleeps on tokio's clock, so paused time advances to it.
    fn ensure_reaper(self: &Arc<Self>, st: &mut QueueState) {
        if !st.waits() {
            return;
        }
        let head = st.next_deadline();
        let running = st.reaper.as_ref().is_some_and(|task| !task.is_finished());
        if !running {
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return;
            };
            st.reaper_target = head;
            let queue = Arc::downgrade(self);
            let wake = Arc::clone(&self.reaper_wake);
            st.reaper = Some(runtime.spawn(reaper(queue, wake)));
        } else if let Some(at) = head
            && st.reaper_target.is_none_or(|target| at < target)
        {
            st.reaper_target = Some(at);
            self.reaper_wake.notify_one();
        }
    }
}

/// The expiry task of one queue: sleeps until the head's deadline (or until
/// woken), expires, and ends when nothing in the queue has a deadline or the
/// queue or broker is gone. It holds no strong reference while it sleeps.
async fn reaper(queue: Weak<Queue>, wake: Arc<Notify>) {
    loop {
        let step = {
            let Some(queue) = queue.upgrade() else {
                return;
            };
            if queue.router.strong_count() == 0 {
                return;
            }
            queue.reap()
        };
        match step {
            ReaperStep::SleepUntil(deadline) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = wake.notified() => {}
                }
            }
            // The head has no deadline; one behind it has: wait until the
            // head changes.
            ReaperStep::WaitForWake => wake.notified().await,
            ReaperStep::Stop => return,
        }
    }
}

/// What the expiry task does next.
enum ReaperStep {
    SleepUntil(Instant),
    WaitForWake,
    Stop,
}
