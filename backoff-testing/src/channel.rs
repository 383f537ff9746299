//! Connections, channels and deliveries: the [`Connection`], [`Channel`] and
//! [`Settle`] implementations of the in-memory broker.
//!
//! A channel keeps its unsettled deliveries by delivery tag; settling one
//! takes it out of the channel (channel lock), then settles it in its queue
//! (queue lock), never holding both. A refused operation closes the channel:
//! every later call fails with the same error, its consumers' streams end
//! with it, and its unsettled deliveries return to their queues in order.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;

use futures_util::future::BoxFuture;
use lapin::BasicProperties;
use lapin::types::AMQPValue;
use rabbit_backoff_core::{ExchangeKind, QueueDecl};
use tokio::sync::mpsc;

use super::broker::BrokerShared;
use super::lock;
use super::queue::{ConsumerSlot, Queue, QueueKind, Settlement, Stored};
use super::replies;
use rabbit_backoff_runtime::transport::{
    Acker, Channel, Confirm, Connection, Deliveries, Delivery, Lost, LostSignal, QueueInfo, Settle,
    TransportError,
};

/// The frame size RabbitMQ 3.10 negotiates by default.
pub(crate) const FRAME_MAX: u32 = 131_072;

/// Why a channel closed, as its later calls report it.
pub(crate) fn channel_closed() -> TransportError {
    TransportError::Closed("the channel is closed".into())
}

fn connection_closed() -> TransportError {
    TransportError::Closed("the connection is closed".into())
}

/// One connection's state, shared with the broker (for forced closes).
pub(crate) struct ConnectionShared {
    state: Mutex<ConnectionState>,
    /// Declared when the connection closes, by the client or the broker.
    lost: LostSignal,
}

struct ConnectionState {
    closed: Option<TransportError>,
    channels: HashMap<u64, Arc<ChannelShared>>,
}

impl ConnectionShared {
    /// Closes the connection and every channel on it with `error`.
    pub(crate) fn close(&self, error: TransportError, broker: &Arc<BrokerShared>, forced: bool) {
        let channels: Vec<Arc<ChannelShared>> = {
            let mut st = lock(&self.state);
            if st.closed.is_some() {
                return;
            }
            st.closed = Some(error.clone());
            st.channels.drain().map(|(_, c)| c).collect()
        };
        self.lost.lose(match &error {
            TransportError::Closed(why) => why.clone(),
            other => other.to_string(),
        });
        for channel in sorted(channels) {
            channel.close(error.clone(), forced, broker);
        }
    }

    /// Closes every open channel with `error`; the connection stays open.
    pub(crate) fn close_channels(&self, error: TransportError, broker: &Arc<BrokerShared>) {
        let channels: Vec<Arc<ChannelShared>> =
            lock(&self.state).channels.values().cloned().collect();
        for channel in sorted(channels) {
            channel.close(error.clone(), true, broker);
        }
    }

    fn forget(&self, channel: u64) {
        lock(&self.state).channels.remove(&channel);
    }
}

fn sorted(mut channels: Vec<Arc<ChannelShared>>) -> Vec<Arc<ChannelShared>> {
    channels.sort_by_key(|c| c.id);
    channels
}

/// One channel's state, shared with the queues its consumers read.
pub(crate) struct ChannelShared {
    id: u64,
    connection: Weak<ConnectionShared>,
    pub(crate) state: Mutex<ChannelState>,
}

/// Under the channel's lock.
pub(crate) struct ChannelState {
    /// Set once the channel is closed: what its calls now fail with.
    pub(crate) closed: Option<TransportError>,
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
    pub(crate) fn next_tag(&mut self) -> u64 {
        self.last_tag += 1;
        self.last_tag
    }

    /// Remembers a delivery until it is settled or the channel closes.
    pub(crate) fn track(
        &mut self,
        tag: u64,
        queue: Arc<Queue>,
        consumer: Option<u64>,
        message: Stored,
    ) {
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
    /// Closes the channel with `error`: its consumers stop (their streams
    /// end, with `error` first when `report` is set) and its unsettled
    /// deliveries return to their queues in delivery order.
    pub(crate) fn close(&self, error: TransportError, report: bool, broker: &Arc<BrokerShared>) {
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
        if let Some(connection) = self.connection.upgrade() {
            connection.forget(self.id);
        }
        for (queue, id) in consumers.into_values() {
            queue.remove_consumer(id, report.then(|| error.clone()));
        }
        for (_, u) in unacked {
            u.queue
                .settle(u.consumer, u.message, Settlement::Return, broker);
        }
    }

    fn closed(&self) -> Option<TransportError> {
        lock(&self.state).closed.clone()
    }
}

/// The delivery a consumer (or `get`) receives for a stored message.
pub(crate) fn delivery_of(
    message: &Stored,
    kind: QueueKind,
    tag: u64,
    channel: &Arc<ChannelShared>,
    broker: &Arc<BrokerShared>,
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
    Delivery {
        exchange: message.exchange.clone(),
        routing_key: message.routing_key.clone(),
        redelivered: message.redelivered,
        properties,
        data: message.body.to_vec(),
        acker: Acker::new(MemoryAcker {
            broker: Arc::downgrade(broker),
            channel: Arc::clone(channel),
            tag,
        }),
    }
}

/// Settles one delivery of an in-memory channel.
struct MemoryAcker {
    broker: Weak<BrokerShared>,
    channel: Arc<ChannelShared>,
    tag: u64,
}

impl MemoryAcker {
    fn settle(&self, how: Settlement) -> Result<(), TransportError> {
        let entry = {
            let mut st = lock(&self.channel.state);
            if st.closed.is_some() {
                // As lapin: the channel's ackers are poisoned.
                return Err(channel_closed());
            }
            st.unacked.remove(&self.tag)
        };
        let Some(entry) = entry else {
            return Err(TransportError::Closed(
                "the delivery is already settled".into(),
            ));
        };
        let Some(broker) = self.broker.upgrade() else {
            return Err(TransportError::Closed("the broker is gone".into()));
        };
        entry
            .queue
            .settle(entry.consumer, entry.message, how, &broker);
        Ok(())
    }
}

impl Settle for MemoryAcker {
    fn ack(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move { self.settle(Settlement::Ack) })
    }

    fn nack(&self, requeue: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        let how = if requeue {
            Settlement::Requeue
        } else {
            Settlement::Reject
        };
        Box::pin(async move { self.settle(how) })
    }
}

/// A connection to the in-memory broker.
pub(crate) struct MemoryConnection {
    broker: Arc<BrokerShared>,
    shared: Arc<ConnectionShared>,
}

impl MemoryConnection {
    pub(crate) fn open(broker: &Arc<BrokerShared>) -> Self {
        let shared = Arc::new(ConnectionShared {
            state: Mutex::new(ConnectionState {
                closed: None,
                channels: HashMap::new(),
            }),
            lost: LostSignal::new(),
        });
        lock(&broker.connections).push(Arc::downgrade(&shared));
        MemoryConnection {
            broker: Arc::clone(broker),
            shared,
        }
    }
}

impl Connection for MemoryConnection {
    fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
        Box::pin(async move {
            let channel = Arc::new(ChannelShared {
                id: self.broker.next_id(),
                connection: Arc::downgrade(&self.shared),
                state: Mutex::new(ChannelState {
                    closed: None,
                    last_tag: 0,
                    unacked: BTreeMap::new(),
                    prefetch: 0,
                    consumers: HashMap::new(),
                }),
            });
            {
                let mut st = lock(&self.shared.state);
                if let Some(error) = &st.closed {
                    return Err(error.clone());
                }
                st.channels.insert(channel.id, Arc::clone(&channel));
            }
            Ok(Arc::new(MemoryChannel {
                broker: Arc::clone(&self.broker),
                shared: channel,
                _connection: Arc::clone(&self.shared),
            }) as Arc<dyn Channel>)
        })
    }

    fn frame_max(&self) -> u32 {
        FRAME_MAX
    }

    fn lost(&self) -> Lost {
        self.shared.lost.watch()
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.shared.close(connection_closed(), &self.broker, false);
        })
    }
}

/// A channel on the in-memory broker. It keeps its connection open, as a
/// client's channel does after the connection handle is dropped.
struct MemoryChannel {
    broker: Arc<BrokerShared>,
    shared: Arc<ChannelShared>,
    _connection: Arc<ConnectionShared>,
}

impl MemoryChannel {
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
                self.shared.close(error.clone(), true, &self.broker);
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

    fn bind_queue<'a>(
        &'a self,
        queue: &'a str,
        exchange: &'a str,
        routing_key: &'a str,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(async move { self.run(|| self.broker.bind_queue(queue, exchange, routing_key)) })
    }

    fn delete_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(async move {
            self.run(|| {
                self.broker.delete_queue(name);
                Ok(())
            })
        })
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
                queue.add_consumer(
                    ConsumerSlot {
                        id,
                        channel: Arc::clone(&self.shared),
                        prefetch,
                        unacked: 0,
                        sender,
                    },
                    &self.broker,
                );
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
                Ok(Deliveries {
                    consumer_tag,
                    stream: Box::pin(stream),
                })
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
        Box::pin(async move { self.run(|| self.queue(queue)?.get(&self.shared, &self.broker)) })
    }

    fn publish<'a>(
        &'a self,
        exchange: &'a str,
        routing_key: &'a str,
        body: &'a [u8],
        properties: BasicProperties,
    ) -> BoxFuture<'a, Result<Confirm, TransportError>> {
        Box::pin(async move {
            self.run(|| {
                if self.broker.take_publish_failure() {
                    let error = TransportError::Closed(
                        "connection lost while publishing (TestBroker::fail_next_publishes)".into(),
                    );
                    self.shared.close(error.clone(), true, &self.broker);
                    return Err(error);
                }
                self.broker.publish(exchange, routing_key, body, properties)
            })
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move { self.shared.close(channel_closed(), false, &self.broker) })
    }
}
