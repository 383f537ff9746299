//! Channels and their deliveries: the [`Channel`] and [`Settle`]
//! implementations of the in-memory broker, and the [`Recipient`] its queues
//! deliver to.
//!
//! A channel keeps its unsettled deliveries by delivery tag; settling one
//! takes it out of the channel (channel lock), then settles it in its queue
//! (queue lock), never holding both. A refused operation closes the channel:
//! every later call fails with the same error, its consumers' streams end
//! with it, and its unsettled deliveries return to their queues in order.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, UNIX_EPOCH};

use futures_util::future::BoxFuture;
use lapin::types::AMQPValue;
use rabbit_backoff_core::{Binding, ExchangeKind, QueueDecl, annotations};
use tokio::sync::mpsc;

use rabbit_backoff_runtime::transport::{
    Acker, AnnotationValue, Channel, Confirm, Deliveries, Delivery, Modification, Publication,
    QueueInfo, Settle, TransportError,
};
use tokio::time::Instant;

use crate::broker_shared::BrokerShared;
use crate::channel_kind::ChannelKind;
use crate::lock::lock;
use crate::queue::{ConsumerSlot, Queue, Recipient};
use crate::queue_config::QueueKind;
use crate::replies;
use crate::set_aside_headers::as_delivered;
use crate::settlement::{Modified, Settlement};
use crate::stored_message::Stored;

/// Why a channel closed, as its later calls report it.
fn channel_closed() -> TransportError {
    TransportError::Closed("the channel is closed".into())
}

/// One channel's state, shared with its connection and with the queues its
/// consumers read.
pub(crate) struct ChannelShared {
    id: u64,
    /// Which kind it is: only a holding channel's deliveries can be
    /// settled as `modified`.
    kind: ChannelKind,
    state: Mutex<ChannelState>,
}

/// Under the channel's lock.
struct ChannelState {
    /// Set once the channel is closed: what its calls now fail with.
    closed: Option<TransportError>,
    last_tag: u64,
    unacked: BTreeMap<u64, Unacked>,
    prefetch: u16,
    /// Consumer tag → (queue, consumer id).
    consumers: HashMap<String, (Arc<Queue>, u64)>,
}

/// A delivery not yet settled.
struct Unacked {
    queue: Arc<Queue>,
    consumer: Option<u64>,
    message: Stored,
}

impl ChannelState {
    /// The next delivery tag (1, 2, …, per channel).
    fn next_tag(&mut self) -> u64 {
        self.last_tag += 1;
        self.last_tag
    }

    /// Remembers a delivery until it is settled or the channel closes.
    fn track(&mut self, tag: u64, queue: Arc<Queue>, consumer: Option<u64>, message: Stored) {
        self.unacked.insert(
            tag,
            Unacked {
                queue,
                consumer,
                message,
            },
        );
    }
}

impl ChannelShared {
    /// A new, open channel of `kind` with a number unique in its broker.
    pub(crate) fn new(id: u64, kind: ChannelKind) -> Self {
        ChannelShared {
            id,
            kind,
            state: Mutex::new(ChannelState {
                closed: None,
                last_tag: 0,
                unacked: BTreeMap::new(),
                prefetch: 0,
                consumers: HashMap::new(),
            }),
        }
    }

    /// Its number, unique in its broker.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Closes the channel with `error`: its consumers stop (their streams
    /// end, with `error` first when `report` is set) and its unsettled
    /// deliveries return to their queues in delivery order.
    pub(crate) fn close(&self, error: TransportError, report: bool) {
        let (consumers, unacked) = {
            let mut st = lock(&self.state);
            if st.closed.is_some() {
                return;
            }
            st.closed = Some(error.clone());
            (
                std::mem::take(&mut st.consumers),
                std::mem::take(&mut st.unacked),
            )
        };
        for (queue, id) in consumers.into_values() {
            queue.remove_consumer(id, report.then(|| error.clone()));
        }
        for (_, u) in unacked {
            u.queue.settle(u.consumer, u.message, Settlement::Return);
        }
    }

    fn closed(&self) -> Option<TransportError> {
        lock(&self.state).closed.clone()
    }

    /// Whether it is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed().is_some()
    }
}

impl Recipient for ChannelShared {
    fn deliver(
        self: Arc<Self>,
        from: &Arc<Queue>,
        consumer: Option<u64>,
        take: &mut dyn FnMut() -> Option<Stored>,
    ) -> Result<Option<Delivery>, TransportError> {
        let mut st = lock(&self.state);
        if let Some(error) = &st.closed {
            return Err(error.clone());
        }
        let Some(message) = take() else {
            return Ok(None);
        };
        let tag = st.next_tag();
        let delivery = delivery_of(&message, from.config.kind, tag, &self);
        st.track(tag, Arc::clone(from), consumer, message);
        drop(st);
        Ok(Some(delivery))
    }
}

/// The delivery a consumer (or `get`) receives for a stored message.
fn delivery_of(
    message: &Stored,
    kind: QueueKind,
    tag: u64,
    channel: &Arc<ChannelShared>,
) -> Delivery {
    let mut properties = message.properties.clone();
    if kind == QueueKind::Quorum && message.delivery_count > 0 {
        // rabbit_quorum_queue adds the count of earlier returns.
        let mut headers = properties.headers().clone().unwrap_or_default();
        headers.insert(
            "x-delivery-count".into(),
            AMQPValue::LongLongInt(i64::from(message.delivery_count)),
        );
        properties = properties.with_headers(headers);
    }
    if channel.kind == ChannelKind::Holding {
        // RabbitMQ 4.3 gives a quorum queue's delivery over AMQP 1.0 the
        // message's route as headers, and on one returned before how often
        // it was acquired.
        let mut headers = properties.headers().clone().unwrap_or_default();
        headers.insert(
            "x-exchange".into(),
            AMQPValue::LongString(message.exchange.as_bytes().into()),
        );
        headers.insert(
            "x-routing-key".into(),
            AMQPValue::LongString(message.routing_key.as_bytes().into()),
        );
        if message.acquired_count > 0 {
            headers.insert(
                "x-acquired-count".into(),
                AMQPValue::LongLongInt(i64::from(message.acquired_count)),
            );
        }
        properties = properties.with_headers(headers);
    }
    if let Some(set_aside) = as_delivered(&properties) {
        properties = set_aside;
    }
    let acker = Acker::new(MemoryAcker {
        channel: Arc::clone(channel),
        tag,
    });
    Delivery::new(message.body.to_vec(), acker)
        .with_route(message.exchange.clone(), message.routing_key.clone())
        .with_properties(properties)
        .with_redelivered(message.redelivered)
}

/// Settles one delivery of an in-memory channel.
struct MemoryAcker {
    channel: Arc<ChannelShared>,
    tag: u64,
}

impl MemoryAcker {
    /// Settles this delivery, and with `multiple` every unsettled delivery
    /// of the channel with a smaller tag, as RabbitMQ does. Settling a tag
    /// the channel does not hold fails, as RabbitMQ's `unknown delivery tag`.
    fn settle(&self, how: Settlement, multiple: bool) -> Result<(), TransportError> {
        self.settle_with(how, multiple, |_| {})
    }

    /// [`settle`](Self::settle), changing each settled message with `edit`
    /// first.
    fn settle_with(
        &self,
        how: Settlement,
        multiple: bool,
        edit: impl Fn(&mut Stored),
    ) -> Result<(), TransportError> {
        let entries = {
            let mut st = lock(&self.channel.state);
            if st.closed.is_some() {
                // As lapin: the channel's ackers are poisoned.
                return Err(channel_closed());
            }
            if multiple {
                let later = st.unacked.split_off(&(self.tag + 1));
                std::mem::replace(&mut st.unacked, later)
                    .into_values()
                    .collect()
            } else {
                st.unacked.remove(&self.tag).into_iter().collect::<Vec<_>>()
            }
        };
        if entries.is_empty() {
            return Err(TransportError::Closed(
                "the delivery is already settled".into(),
            ));
        }
        for mut entry in entries {
            edit(&mut entry.message);
            entry.queue.settle(entry.consumer, entry.message, how);
        }
        Ok(())
    }
}

/// `x-opt-delivery-time` (Unix milliseconds on the framework's clock) as a
/// time on tokio's clock; a time past is now. The wait is counted in whole
/// milliseconds, rounded up, as RabbitMQ's timers count it: a message is
/// never delivered before the millisecond it names.
fn delivery_time(unix_ms: i64) -> Instant {
    let now = rabbit_backoff_runtime::clock::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let at = Duration::from_millis(u64::try_from(unix_ms).unwrap_or(0));
    let wait_ms = at.saturating_sub(now).as_nanos().div_ceil(1_000_000);
    Instant::now() + Duration::from_millis(u64::try_from(wait_ms).unwrap_or(u64::MAX))
}

impl Settle for MemoryAcker {
    fn delivery_tag(&self) -> u64 {
        self.tag
    }

    fn ack(&self, multiple: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move { self.settle(Settlement::Ack, multiple) })
    }

    fn nack(&self, requeue: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        let how = if requeue {
            Settlement::Requeue
        } else {
            Settlement::Reject
        };
        Box::pin(async move { self.settle(how, false) })
    }

    /// A rejection with requeue: on 3.10 the same as a requeue; on 4.3 a
    /// failed delivery, counted and, under the queue's delayed retries,
    /// held back.
    fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move { self.settle(Settlement::Fail, false) })
    }

    /// `modified`, on a delivery of a holding channel: its
    /// `x-opt-` annotations set on the message (as the headers an AMQP
    /// 0-9-1 consumer reads), then held back until its
    /// `x-opt-delivery-time` by a 4.3 quorum queue, delivered again, or
    /// dead-lettered (`undeliverable-here`).
    fn modify(&self, modification: Modification) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            if self.channel.kind != ChannelKind::Holding {
                return Err(TransportError::Other(
                    "this delivery cannot be settled as `modified` (an AMQP 1.0 outcome)"
                        .to_owned(),
                ));
            }
            let until = modification.annotations.iter().find_map(|(key, value)| {
                match (key.as_str(), value) {
                    (annotations::DELIVERY_TIME, AnnotationValue::Timestamp(ms)) => {
                        Some(delivery_time(*ms))
                    }
                    _ => None,
                }
            });
            let how = Settlement::Modify(Modified {
                delivery_failed: modification.delivery_failed,
                undeliverable_here: modification.undeliverable_here,
                until,
            });
            self.settle_with(how, false, |message| {
                let kept = modification
                    .annotations
                    .iter()
                    .filter(|(key, _)| key.starts_with("x-opt-"));
                let mut headers = message.properties.headers().clone().unwrap_or_default();
                for (key, value) in kept {
                    headers.insert(key.as_str().into(), value.as_header());
                }
                message.properties = message.properties.clone().with_headers(headers);
            })
        })
    }
}

/// A channel on the in-memory broker.
pub(crate) struct MemoryChannel {
    broker: Arc<BrokerShared>,
    shared: Arc<ChannelShared>,
}

impl MemoryChannel {
    /// The channel whose state is `shared`, on `broker`.
    pub(crate) fn new(broker: Arc<BrokerShared>, shared: Arc<ChannelShared>) -> Self {
        MemoryChannel { broker, shared }
    }

    /// Runs an operation on an open channel; a refusal closes the channel.
    fn run<T>(
        &self,
        operation: impl FnOnce() -> Result<T, TransportError>,
    ) -> Result<T, TransportError> {
        if let Some(error) = self.shared.closed() {
            return Err(error);
        }
        operation().inspect_err(|error| {
            if matches!(error, TransportError::Refused { .. }) {
                self.shared.close(error.clone(), true);
            }
        })
    }

    fn queue(&self, name: &str) -> Result<Arc<Queue>, TransportError> {
        self.broker
            .queue(name)
            .ok_or_else(|| replies::not_found("queue", name))
    }
}

impl Channel for MemoryChannel {
    fn declare_exchange<'a>(
        &'a self,
        name: &'a str,
        kind: ExchangeKind,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(async move { self.run(|| self.broker.declare_exchange(name, kind)) })
    }

    fn declare_queue<'a>(
        &'a self,
        queue: &'a QueueDecl,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        Box::pin(async move { self.run(|| self.broker.declare_queue(queue)) })
    }

    fn bind_queue<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(async move { self.run(|| self.broker.bind_queue(binding)) })
    }

    fn delete_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(async move {
            self.run(|| {
                self.broker.delete_queue(name);
                Ok(())
            })
        })
    }

    /// Answers at once, unless the broker was cut off from its majority
    /// ([`TestBroker::lose_majority`](crate::TestBroker::lose_majority)):
    /// then never.
    fn probe_metadata(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            self.run(|| Ok(()))?;
            if self
                .broker
                .majority_lost
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                std::future::pending::<()>().await;
            }
            Ok(())
        })
    }

    fn purge_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<u32, TransportError>> {
        Box::pin(async move { self.run(|| self.broker.purge_queue(name)) })
    }

    fn check_exchange<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(async move { self.run(|| self.broker.check_exchange(name)) })
    }

    fn check_queue<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        Box::pin(async move { self.run(|| self.broker.check_queue(name)) })
    }

    fn qos(&self, prefetch: u16) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            self.run(|| {
                lock(&self.shared.state).prefetch = prefetch;
                Ok(())
            })
        })
    }

    fn consume<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
        Box::pin(async move {
            self.run(|| {
                let queue = self.queue(queue)?;
                let id = self.broker.next_id();
                let consumer_tag = format!("amq.ctag-{id}");
                let (sender, mut receiver) = mpsc::unbounded_channel();
                let prefetch = {
                    let mut st = lock(&self.shared.state);
                    if let Some(error) = &st.closed {
                        return Err(error.clone());
                    }
                    st.consumers
                        .insert(consumer_tag.clone(), (Arc::clone(&queue), id));
                    st.prefetch
                };
                queue.add_consumer(ConsumerSlot {
                    id,
                    recipient: Arc::clone(&self.shared) as Arc<dyn Recipient>,
                    prefetch,
                    unacked: 0,
                    sender,
                });
                // Deliveries still buffered when the channel closed went back
                // to their queue: the stream skips them.
                let channel = Arc::clone(&self.shared);
                let stream = futures_util::stream::poll_fn(move |cx| {
                    loop {
                        match receiver.poll_recv(cx) {
                            Poll::Ready(Some(Ok(_))) if channel.closed().is_some() => continue,
                            other => return other,
                        }
                    }
                });
                Ok(Deliveries::new(consumer_tag, Box::pin(stream)))
            })
        })
    }

    fn cancel<'a>(&'a self, consumer_tag: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(async move {
            self.run(|| {
                let consumer = lock(&self.shared.state).consumers.remove(consumer_tag);
                if let Some((queue, id)) = consumer {
                    queue.remove_consumer(id, None);
                }
                Ok(())
            })
        })
    }

    fn get<'a>(
        &'a self,
        queue: &'a str,
    ) -> BoxFuture<'a, Result<Option<Delivery>, TransportError>> {
        Box::pin(async move {
            self.run(|| {
                self.queue(queue)?
                    .get(Arc::clone(&self.shared) as Arc<dyn Recipient>)
            })
        })
    }

    fn publish<'a>(
        &'a self,
        message: Publication<'a>,
    ) -> BoxFuture<'a, Result<Confirm, TransportError>> {
        Box::pin(async move {
            self.run(|| {
                if self.broker.take_publish_failure() {
                    let error = TransportError::Closed(
                        "connection lost while publishing (TestBroker::fail_next_publishes)".into(),
                    );
                    self.shared.close(error.clone(), true);
                    return Err(error);
                }
                let Publication {
                    exchange,
                    routing_key,
                    body,
                    properties,
                    ..
                } = message;
                self.broker.publish(exchange, routing_key, body, properties)
            })
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move { self.shared.close(channel_closed(), false) })
    }
}
