//! Queues: their arguments, their messages in order, expiry at the head,
//! overflow, consumers (round robin, prefetch), returns and dead letters.
//!
//! Every operation runs under the queue's own lock and never awaits. What it
//! dead-letters is handed back to the caller, which routes it through the
//! dead-letter exchange after the lock is released (so a queue never holds
//! its lock while it takes another queue's). Lock order: a queue, then a
//! channel; never the other way round.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use lapin::BasicProperties;
use rabbit_backoff_core::Argument;
use rabbit_backoff_core::arguments as arg;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::broker::BrokerShared;
use super::channel::{ChannelShared, delivery_of};
use super::death::Reason;
use super::lock;
use super::replies;
use rabbit_backoff_runtime::transport::{Delivery, QueueInfo, TransportError};

/// `classic` or `quorum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueKind {
    Classic,
    Quorum,
}

/// What a full queue (`x-max-length`) does with one more message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Drops (dead-letters, reason `maxlen`) from the head.
    DropHead,
    /// Refuses the new message: the publisher gets a nack.
    RejectPublish,
}

/// A queue's arguments, as the broker acts on them.
#[derive(Debug, Clone)]
pub(crate) struct QueueConfig {
    pub(crate) kind: QueueKind,
    pub(crate) message_ttl: Option<Duration>,
    pub(crate) dead_letter_exchange: Option<String>,
    pub(crate) dead_letter_routing_key: Option<String>,
    pub(crate) max_length: Option<usize>,
    pub(crate) overflow: Overflow,
    /// Quorum queues only.
    pub(crate) delivery_limit: Option<u64>,
}

/// The arguments RabbitMQ compares when a queue is declared again, in the
/// order it compares them (`rabbit_amqqueue:declare_args/0`); the first that
/// differs is the one the error names. Other arguments are not compared.
const COMPARED_ARGUMENTS: &[&str] = &[
    "x-expires",
    arg::MESSAGE_TTL,
    arg::DEAD_LETTER_EXCHANGE,
    arg::DEAD_LETTER_ROUTING_KEY,
    arg::DEAD_LETTER_STRATEGY,
    "x-max-length",
    "x-max-length-bytes",
    "x-max-in-memory-length",
    "x-max-in-memory-bytes",
    "x-max-priority",
    arg::OVERFLOW,
    "x-queue-mode",
    "x-queue-version",
    "x-single-active-consumer",
    arg::QUEUE_TYPE,
    "x-quorum-initial-group-size",
    "x-max-age",
    "x-stream-max-segment-size-bytes",
    "x-initial-cluster-size",
    "x-queue-leader-locator",
    arg::DELIVERY_LIMIT,
];

impl QueueConfig {
    /// Reads and validates a declaration's arguments, refusing what RabbitMQ
    /// refuses (`PRECONDITION_FAILED - invalid arg …`).
    pub(crate) fn parse(
        queue: &str,
        arguments: &[(String, Argument)],
    ) -> Result<Self, TransportError> {
        let find = |key: &str| arguments.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let non_negative = |key: &str| -> Result<Option<u64>, TransportError> {
            match find(key) {
                None => Ok(None),
                Some(Argument::Int(n)) if *n >= 0 => Ok(Some(*n as u64)),
                Some(Argument::Int(n)) => Err(replies::invalid_argument(
                    queue,
                    key,
                    &format!("{{value_negative,{n}}}"),
                )),
                Some(Argument::Str(_)) => Err(replies::invalid_argument(
                    queue,
                    key,
                    "{unacceptable_type,longstr}",
                )),
            }
        };
        let string = |key: &str| -> Result<Option<String>, TransportError> {
            match find(key) {
                None => Ok(None),
                Some(Argument::Str(s)) => Ok(Some(s.clone())),
                Some(Argument::Int(_)) => Err(replies::invalid_argument(
                    queue,
                    key,
                    "{unacceptable_type,long}",
                )),
            }
        };

        let kind = match string(arg::QUEUE_TYPE)?.as_deref() {
            None | Some("classic") => QueueKind::Classic,
            Some("quorum") => QueueKind::Quorum,
            Some("stream") => {
                return Err(TransportError::Other(
                    "the in-memory broker has no stream queues".into(),
                ));
            }
            Some(other) => {
                return Err(replies::invalid_argument(
                    queue,
                    arg::QUEUE_TYPE,
                    &format!("{{unsupported_queue_type,<<\"{other}\">>}}"),
                ));
            }
        };
        let message_ttl = non_negative(arg::MESSAGE_TTL)?.map(Duration::from_millis);
        let dead_letter_exchange = string(arg::DEAD_LETTER_EXCHANGE)?;
        let dead_letter_routing_key = string(arg::DEAD_LETTER_ROUTING_KEY)?;
        if dead_letter_routing_key.is_some() && dead_letter_exchange.is_none() {
            return Err(replies::invalid_argument(
                queue,
                arg::DEAD_LETTER_ROUTING_KEY,
                "routing_key_but_no_dlx_defined",
            ));
        }
        let max_length = non_negative("x-max-length")?.map(|n| n as usize);
        let overflow = match string(arg::OVERFLOW)?.as_deref() {
            None | Some("drop-head") => Overflow::DropHead,
            // reject-publish-dlx also dead-letters the refused message in a
            // classic queue; the in-memory broker only refuses it.
            Some("reject-publish") | Some("reject-publish-dlx") => Overflow::RejectPublish,
            Some(other) => {
                return Err(replies::invalid_argument(
                    queue,
                    arg::OVERFLOW,
                    &format!("{{invalid_overflow,<<\"{other}\">>}}"),
                ));
            }
        };
        let delivery_limit = match kind {
            QueueKind::Quorum => non_negative(arg::DELIVERY_LIMIT)?,
            QueueKind::Classic => None,
        };
        Ok(QueueConfig {
            kind,
            message_ttl,
            dead_letter_exchange,
            dead_letter_routing_key,
            max_length,
            overflow,
            delivery_limit,
        })
    }
}

/// Compares a redeclaration with the arguments a queue was declared with,
/// as `rabbit_misc:assert_args_equivalence/4` does.
pub(crate) fn assert_equivalent(
    queue: &str,
    current: &[(String, Argument)],
    received: &[(String, Argument)],
) -> Result<(), TransportError> {
    let find = |list: &'_ [(String, Argument)], key: &str| {
        list.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    };
    for key in COMPARED_ARGUMENTS {
        let (c, r) = (find(current, key), find(received, key));
        if c == r {
            continue;
        }
        // A classic queue may be declared with or without x-queue-type.
        let classic = Some(Argument::Str("classic".into()));
        if *key == arg::QUEUE_TYPE && (c.is_none() && r == classic || c == classic && r.is_none()) {
            continue;
        }
        return Err(replies::inequivalent_argument(
            queue,
            key,
            r.as_ref(),
            c.as_ref(),
        ));
    }
    Ok(())
}

/// A message in a queue (or delivered from it and not yet settled).
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// Its position in the queue: classic queues requeue by it.
    pub(crate) seq: u64,
    /// The exchange it was last published or dead-lettered to.
    pub(crate) exchange: String,
    pub(crate) routing_key: String,
    pub(crate) properties: BasicProperties,
    pub(crate) body: Arc<[u8]>,
    pub(crate) redelivered: bool,
    /// Quorum queues: how many times it was returned.
    pub(crate) delivery_count: u32,
    /// When it expires at the head of the queue.
    pub(crate) expires_at: Option<Instant>,
}

/// A message leaving a queue for its dead-letter exchange.
pub(crate) struct DeadLetter {
    pub(crate) message: Stored,
    pub(crate) reason: Reason,
    pub(crate) from: Arc<Queue>,
}

/// How a consumer (or the broker, for a closing channel) settles a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settlement {
    Ack,
    Requeue,
    Reject,
    /// Returned because its channel closed.
    Return,
}

/// One consumer attached to a queue.
pub(crate) struct ConsumerSlot {
    pub(crate) id: u64,
    pub(crate) channel: Arc<ChannelShared>,
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

/// What a queue is doing, for [`TestBroker::run_until_idle`](super::TestBroker::run_until_idle).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Activity {
    pub(crate) ready: usize,
    pub(crate) unacked: usize,
    pub(crate) with_deadline: usize,
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
    pub(crate) fn new(name: &str, config: QueueConfig, arguments: Vec<(String, Argument)>) -> Self {
        Queue {
            name: name.to_owned(),
            config,
            arguments,
            state: Mutex::new(QueueState::default()),
            reaper_wake: Arc::new(Notify::new()),
        }
    }

    /// Ready messages and consumers, after expiring what is due at the head.
    pub(crate) fn info(self: &Arc<Self>, broker: &Arc<BrokerShared>) -> QueueInfo {
        let mut dead = Vec::new();
        let info = {
            let mut st = lock(&self.state);
            self.expire_heads(&mut st, Instant::now(), &mut dead);
            self.ensure_reaper(&mut st, broker);
            QueueInfo {
                messages: u32::try_from(st.len()).unwrap_or(u32::MAX),
                consumers: u32::try_from(st.consumers.len()).unwrap_or(u32::MAX),
            }
        };
        broker.dead_letter(dead);
        info
    }

    /// Adds a newly published or dead-lettered message. `false`: refused by
    /// `x-overflow = reject-publish`.
    pub(crate) fn enqueue(
        self: &Arc<Self>,
        mut message: Stored,
        message_ttl: Option<Duration>,
        now: Instant,
        broker: &Arc<BrokerShared>,
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
            self.dispatch(&mut st, broker, now, dead);
            while st.len() > max {
                if let Some(dropped) = st.pop_head() {
                    dead.push(self.dead_letter(dropped, Reason::Maxlen));
                }
            }
        }
        self.dispatch(&mut st, broker, now, dead);
        true
    }

    /// Attaches a consumer and delivers what it can take.
    pub(crate) fn add_consumer(self: &Arc<Self>, slot: ConsumerSlot, broker: &Arc<BrokerShared>) {
        let mut dead = Vec::new();
        {
            let mut st = lock(&self.state);
            st.consumers.push(slot);
            self.dispatch(&mut st, broker, Instant::now(), &mut dead);
        }
        broker.dead_letter(dead);
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
        channel: &Arc<ChannelShared>,
        broker: &Arc<BrokerShared>,
    ) -> Result<Option<Delivery>, TransportError> {
        let mut dead = Vec::new();
        let result = {
            let mut st = lock(&self.state);
            self.expire_heads(&mut st, Instant::now(), &mut dead);
            let mut ch = lock(&channel.state);
            let result = if let Some(error) = &ch.closed {
                Err(error.clone())
            } else if let Some(message) = st.pop_head() {
                let tag = ch.next_tag();
                let delivery = delivery_of(&message, self.config.kind, tag, channel, broker);
                ch.track(tag, Arc::clone(self), None, message);
                st.unacked += 1;
                Ok(Some(delivery))
            } else {
                Ok(None)
            };
            drop(ch);
            self.ensure_reaper(&mut st, broker);
            result
        };
        broker.dead_letter(dead);
        result
    }

    /// Settles one delivery of this queue.
    pub(crate) fn settle(
        self: &Arc<Self>,
        consumer: Option<u64>,
        mut message: Stored,
        how: Settlement,
        broker: &Arc<BrokerShared>,
    ) {
        let mut dead = Vec::new();
        {
            let mut st = lock(&self.state);
            st.unacked = st.unacked.saturating_sub(1);
            if let Some(slot) = consumer.and_then(|id| st.consumers.iter_mut().find(|c| c.id == id))
            {
                slot.unacked = slot.unacked.saturating_sub(1);
            }
            match (how, self.config.kind) {
                (Settlement::Ack, _) => {}
                (Settlement::Reject, _) => dead.push(self.dead_letter(message, Reason::Rejected)),
                (Settlement::Requeue | Settlement::Return, QueueKind::Classic) => {
                    message.redelivered = true;
                    st.insert_in_order(message);
                }
                (Settlement::Requeue | Settlement::Return, QueueKind::Quorum) => {
                    // rabbit_fifo (3.10): a return counts a delivery; over
                    // the limit, the message is dead-lettered. A requeue with
                    // no limit set is re-enqueued at the back; otherwise
                    // (and for a closing channel) it joins the returns,
                    // which are served first.
                    message.redelivered = true;
                    message.delivery_count += 1;
                    match self.config.delivery_limit {
                        Some(limit) if u64::from(message.delivery_count) > limit => {
                            dead.push(self.dead_letter(message, Reason::DeliveryLimit));
                        }
                        None if how == Settlement::Requeue => {
                            message.seq = st.next_seq();
                            st.push_back(message);
                        }
                        _ => st.push_return(message),
                    }
                }
            }
            self.dispatch(&mut st, broker, Instant::now(), &mut dead);
        }
        broker.dead_letter(dead);
    }

    /// Expires what is due at the head and delivers: the expiry task's step.
    fn reap(self: &Arc<Self>, broker: &Arc<BrokerShared>) -> ReaperStep {
        let mut dead = Vec::new();
        let next = {
            let mut st = lock(&self.state);
            self.dispatch(&mut st, broker, Instant::now(), &mut dead);
            if st.with_deadline == 0 {
                st.reaper = None;
                st.reaper_target = None;
                ReaperStep::Stop
            } else {
                st.reaper_target = st.head().and_then(|m| m.expires_at);
                match st.reaper_target {
                    Some(at) => ReaperStep::SleepUntil(at),
                    None => ReaperStep::WaitForWake,
                }
            }
        };
        broker.dead_letter(dead);
        next
    }

    /// Expires what is due at the head, for a caller that is about to read.
    pub(crate) fn expire_due(self: &Arc<Self>, broker: &Arc<BrokerShared>) {
        let mut dead = Vec::new();
        {
            let mut st = lock(&self.state);
            self.dispatch(&mut st, broker, Instant::now(), &mut dead);
        }
        broker.dead_letter(dead);
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
            consumers: st.consumers.len(),
            next_deadline: st.head().and_then(|m| m.expires_at),
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
    fn dispatch(
        self: &Arc<Self>,
        st: &mut QueueState,
        broker: &Arc<BrokerShared>,
        now: Instant,
        dead: &mut Vec<DeadLetter>,
    ) {
        loop {
            self.expire_heads(st, now, dead);
            if st.len() == 0 {
                break;
            }
            let Some(index) = st.next_consumer() else {
                break;
            };
            let channel = Arc::clone(&st.consumers[index].channel);
            let mut ch = lock(&channel.state);
            if ch.closed.is_some() {
                drop(ch);
                st.remove_consumer_at(index);
                continue;
            }
            let Some(message) = st.pop_head() else {
                break;
            };
            let tag = ch.next_tag();
            let delivery = delivery_of(&message, self.config.kind, tag, &channel, broker);
            let slot = &mut st.consumers[index];
            ch.track(tag, Arc::clone(self), Some(slot.id), message);
            drop(ch);
            slot.unacked += 1;
            // A consumer whose stream was dropped still holds the delivery,
            // unacknowledged, until its channel closes: as with a client.
            let _ = slot.sender.send(Ok(delivery));
            st.unacked += 1;
            st.cursor = index + 1;
        }
        self.ensure_reaper(st, broker);
    }

    /// Keeps an expiry task running while the queue holds messages with a
    /// deadline, and wakes it when the head's deadline moves earlier. The
    /// task sleeps on tokio's clock, so paused time advances to it.
    fn ensure_reaper(self: &Arc<Self>, st: &mut QueueState, broker: &Arc<BrokerShared>) {
        if st.with_deadline == 0 {
            return;
        }
        let head = st.head().and_then(|m| m.expires_at);
        let running = st.reaper.as_ref().is_some_and(|task| !task.is_finished());
        if !running {
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return;
            };
            st.reaper_target = head;
            let queue = Arc::downgrade(self);
            let broker = Arc::downgrade(broker);
            let wake = Arc::clone(&self.reaper_wake);
            st.reaper = Some(runtime.spawn(reaper(queue, broker, wake)));
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
async fn reaper(queue: Weak<Queue>, broker: Weak<BrokerShared>, wake: Arc<Notify>) {
    loop {
        let step = {
            let (Some(queue), Some(broker)) = (queue.upgrade(), broker.upgrade()) else {
                return;
            };
            queue.reap(&broker)
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
