//! What the framework asks of a broker, and nothing more: the seam between
//! the runtime and the AMQP client.
//!
//! [`Transport`] connects; a [`Connection`] opens channels; a [`Channel`] (always
//! in publisher-confirm mode) declares, checks, consumes, gets, publishes and
//! closes. [`amqp`] implements it over lapin for a real RabbitMQ; the
//! `rabbit-backoff-testing` crate (`rabbit_backoff::testing`) implements it in
//! memory, with the same semantics.
//!
//! A [`Connection`] says when it is [`lost`](Connection::lost): the client has
//! seen its socket reset or its node die. Operations on it then fail at once
//! rather than wait for an answer that cannot come.
//!
//! Messages keep lapin's data model ([`BasicProperties`], field tables and
//! values, re-exported as `rabbit_backoff::lapin`), so both implementations
//! carry exactly what goes on the wire.
pub mod amqp;
mod connector;
pub(crate) mod declare;
pub(crate) mod delayed_retry_probe;
pub(crate) mod error;
pub(crate) mod frame_guard;
pub(crate) mod inspect;
pub(crate) mod lapin_error;
pub mod lost;
pub(crate) mod open;
pub(crate) mod probe;
pub(crate) mod shape;
pub(crate) mod store_error;
pub mod stream_offset;
#[cfg(feature = "tls")]
mod tls;
pub mod tls_error;
pub(crate) mod values;

pub use amqp::AmqpTransport;
pub use lost::{Lost, LostSignal};
pub use stream_offset::StreamOffset;
pub use tls_error::{TlsError, Trusted};
pub use values::header_view;

use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use lapin::BasicProperties;
use rabbit_backoff_core::{ExchangeKind, QueueDecl};

/// A way to reach a broker: each call of [`connect`](Transport::connect) is a
/// new connection, as after a reconnect.
pub trait Transport: Send + Sync + 'static {
    /// Opens a connection.
    fn connect(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>>;

    /// Where it connects, for logs and errors, without a password.
    fn describe(&self) -> String;

    /// The host and port of each node, for the cheap TCP probes the runtime
    /// makes between reconnection attempts to notice a node that comes back.
    /// Empty (the default) when there is no socket address to probe, as for
    /// an in-memory broker: the runtime then only follows its backoff.
    fn probe_addresses(&self) -> Vec<(String, u16)> {
        Vec::new()
    }
}

impl<T: Transport + ?Sized> Transport for Arc<T> {
    fn connect(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>> {
        (**self).connect()
    }

    fn describe(&self) -> String {
        (**self).describe()
    }

    fn probe_addresses(&self) -> Vec<(String, u16)> {
        (**self).probe_addresses()
    }
}

/// One connection to a broker.
pub trait Connection: Send + Sync + 'static {
    /// Opens a channel in publisher-confirm mode.
    fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>>;

    /// The negotiated frame size: a message's properties and headers must fit
    /// in one frame of this many bytes.
    fn frame_max(&self) -> u32;

    /// The node it is connected to, for logs and health (no password).
    fn node(&self) -> String {
        String::from("(in memory)")
    }

    /// Watches whether the connection is lost (its socket reset, its node
    /// gone, closed by the broker). Once it is, every operation on it and on
    /// its channels and deliveries fails at once, and consumers' streams
    /// end with an error. The default never reports a loss, for an
    /// implementation whose operations always end by themselves.
    fn lost(&self) -> Lost {
        Lost::never()
    }

    /// Closes the connection; unsettled deliveries of every channel return to
    /// their queues.
    fn close(&self) -> BoxFuture<'_, ()>;
}

/// One channel, in publisher-confirm mode. A refused operation (such as a
/// declaration with other arguments than the existing queue's) closes it, as
/// AMQP 0-9-1 does: every later call fails with the same error.
pub trait Channel: Send + Sync + 'static {
    /// Declares a durable exchange (idempotent when it exists with the same type).
    fn declare_exchange<'a>(
        &'a self,
        name: &'a str,
        kind: ExchangeKind,
    ) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Declares a durable queue with its arguments (idempotent when it exists
    /// with the same arguments; [`TransportError::Refused`] with code 406
    /// `PRECONDITION_FAILED` otherwise).
    fn declare_queue<'a>(
        &'a self,
        queue: &'a QueueDecl,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>>;

    /// Binds a queue to an exchange with a routing key.
    fn bind_queue<'a>(
        &'a self,
        queue: &'a str,
        exchange: &'a str,
        routing_key: &'a str,
    ) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Checks that an exchange exists (a passive declare): code 404
    /// `NOT_FOUND` when it does not.
    fn check_exchange<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Checks that a queue exists (a passive declare) and reads its depth:
    /// code 404 `NOT_FOUND` when it does not.
    fn check_queue<'a>(&'a self, name: &'a str)
    -> BoxFuture<'a, Result<QueueInfo, TransportError>>;

    /// Sets how many unacknowledged deliveries the broker sends to this
    /// channel's consumers (`basic.qos`, per consumer).
    fn qos(&self, prefetch: u16) -> BoxFuture<'_, Result<(), TransportError>>;

    /// Starts consuming `queue`, manual acknowledgement.
    fn consume<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<Deliveries, TransportError>>;

    /// Starts consuming the stream `queue` from `offset`, manual
    /// acknowledgement: the messages stay in the stream, and an ack only
    /// lets the broker send more, so set a prefetch with
    /// [`qos`](Channel::qos) first. The default refuses: a broker without
    /// streams (the in-memory one) has none to read.
    fn consume_stream<'a>(
        &'a self,
        queue: &'a str,
        offset: StreamOffset,
    ) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
        let _ = offset;
        Box::pin(async move {
            Err(TransportError::Other(format!(
                "'{queue}': this broker has no stream queues"
            )))
        })
    }

    /// Stops the consumer with this tag: nothing more is delivered to it; the
    /// deliveries it holds stay unacknowledged until settled or the channel
    /// closes.
    fn cancel<'a>(&'a self, consumer_tag: &'a str) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Takes the message at the head of `queue`, unacknowledged (`basic.get`).
    fn get<'a>(&'a self, queue: &'a str)
    -> BoxFuture<'a, Result<Option<Delivery>, TransportError>>;

    /// Publishes with `mandatory` and resolves once the broker confirmed this
    /// very message (or returned or refused it).
    fn publish<'a>(
        &'a self,
        exchange: &'a str,
        routing_key: &'a str,
        body: &'a [u8],
        properties: BasicProperties,
    ) -> BoxFuture<'a, Result<Confirm, TransportError>>;

    /// Publishes like [`publish`](Channel::publish), but resolves as soon as
    /// the message is handed to the connection, in call order, with the
    /// broker's confirmation still to come: many messages can be in flight
    /// at once, and still reach the queue in the order they were sent.
    fn send<'a>(
        &'a self,
        exchange: &'a str,
        routing_key: &'a str,
        body: &'a [u8],
        properties: BasicProperties,
    ) -> BoxFuture<'a, Result<PendingConfirm, TransportError>> {
        Box::pin(async move {
            let confirm = self
                .publish(exchange, routing_key, body, properties)
                .await?;
            let pending: PendingConfirm = Box::pin(std::future::ready(Ok(confirm)));
            Ok(pending)
        })
    }

    /// Removes every ready message of `queue` (`queue.purge`) and says how
    /// many; unacknowledged deliveries stay. The default refuses, for a
    /// broker that cannot.
    fn purge_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<u32, TransportError>> {
        Box::pin(async move {
            Err(TransportError::Other(format!(
                "'{name}': this broker cannot purge a queue"
            )))
        })
    }

    /// Deletes a queue and its messages (nothing when it does not exist).
    fn delete_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Closes the channel; its unsettled deliveries return to their queues,
    /// in their original order.
    fn close(&self) -> BoxFuture<'_, ()>;
}

/// The broker's confirmation of a message handed over by [`Channel::send`].
pub type PendingConfirm = BoxFuture<'static, Result<Confirm, TransportError>>;

/// A queue's depth, as a declaration or a passive check reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueInfo {
    /// Messages ready for delivery.
    pub messages: u32,
    /// Consumers attached.
    pub consumers: u32,
}

/// What the broker said about one published message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirm {
    /// Routed and confirmed.
    Ack,
    /// Refused (`basic.nack`), for example by a full queue with
    /// `x-overflow = reject-publish`.
    Nack,
    /// Returned: no queue is bound for its routing key (`basic.return`).
    Returned,
}

/// Deliveries of one consumer, with its tag for [`Channel::cancel`]. The
/// stream ends when the consumer is cancelled or the channel closes; an
/// error says why it ended abnormally.
pub struct Deliveries {
    /// The consumer tag.
    pub consumer_tag: String,
    /// The deliveries, in order.
    pub stream: BoxStream<'static, Result<Delivery, TransportError>>,
}

/// One message delivered to a consumer or got with [`Channel::get`].
pub struct Delivery {
    /// The exchange it was published to (empty for the default exchange).
    pub exchange: String,
    /// Its routing key.
    pub routing_key: String,
    /// Whether it was delivered before and returned unsettled.
    pub redelivered: bool,
    /// Its properties and headers.
    pub properties: BasicProperties,
    /// Its body.
    pub data: Vec<u8>,
    /// Settles it.
    pub acker: Acker,
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("exchange", &self.exchange)
            .field("routing_key", &self.routing_key)
            .field("redelivered", &self.redelivered)
            .field("message_id", self.properties.message_id())
            .field("body_len", &self.data.len())
            .finish_non_exhaustive()
    }
}

/// How a delivery is settled; each implementation provides its own.
pub trait Settle: Send + Sync + 'static {
    /// The delivery's tag: the deliveries of one channel are numbered from
    /// 1, in the order the broker sent them.
    fn delivery_tag(&self) -> u64;
    /// Acknowledges the delivery; with `multiple`, every unacknowledged
    /// delivery of its channel with a smaller tag as well (`basic.ack` with
    /// `multiple`, one frame for many deliveries).
    fn ack(&self, multiple: bool) -> BoxFuture<'_, Result<(), TransportError>>;
    /// Returns it: to its queue when `requeue` (with `redelivered` set), or
    /// dead-letters it through its queue's dead-letter exchange otherwise.
    fn nack(&self, requeue: bool) -> BoxFuture<'_, Result<(), TransportError>>;
    /// Returns it to its queue as a failed delivery (`basic.reject` with
    /// requeue). RabbitMQ 4.3 tells the two returns apart on a quorum queue:
    /// this one counts in `x-delivery-count` (and toward the delivery limit)
    /// and is held back by the queue's delayed retry; a `nack` with requeue
    /// is neither. Before 4.3, and on the in-memory broker, the two are the
    /// same.
    fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>>;
}

/// Settles one delivery, once. A delivery dropped unsettled stays
/// unacknowledged until its channel closes.
pub struct Acker(Box<dyn Settle>);

impl Acker {
    /// An acker backed by `settle`.
    pub fn new(settle: impl Settle) -> Self {
        Acker(Box::new(settle))
    }

    /// The delivery's tag on its channel.
    pub fn delivery_tag(&self) -> u64 {
        self.0.delivery_tag()
    }

    /// Acknowledges the delivery. An error: the channel is gone, and the
    /// broker will redeliver the message.
    pub async fn ack(&self) -> Result<(), TransportError> {
        self.0.ack(false).await
    }

    /// Acknowledges the delivery and every unacknowledged delivery of its
    /// channel with a smaller tag, in one `basic.ack` with `multiple`. A
    /// delivery nacked before is not acknowledged again.
    pub async fn ack_multiple(&self) -> Result<(), TransportError> {
        self.0.ack(true).await
    }

    /// Returns the delivery to its queue, marked redelivered.
    pub async fn requeue(&self) -> Result<(), TransportError> {
        self.0.nack(true).await
    }

    /// Returns the delivery to its queue as a failed delivery
    /// (`basic.reject` with requeue), which RabbitMQ 4.3 counts and, under a
    /// delayed retry, holds back (see [`Settle::fail`]).
    pub async fn fail(&self) -> Result<(), TransportError> {
        self.0.fail().await
    }

    /// Rejects the delivery without requeue: its queue's dead-letter exchange
    /// takes it, with an `x-death` entry saying `rejected`.
    pub async fn reject(&self) -> Result<(), TransportError> {
        self.0.nack(false).await
    }
}

/// A failure talking to the broker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The broker refused an operation with an AMQP reply code, closing the
    /// channel (or, for a hard error, the connection).
    #[error("{text} (AMQP {code})")]
    Refused {
        /// The reply code: 404 `NOT_FOUND`, 406 `PRECONDITION_FAILED`, …
        code: u16,
        /// The broker's words.
        text: String,
    },
    /// The channel or connection is closed or lost.
    #[error("closed: {0}")]
    Closed(String),
    /// An `amqps://` connection could not be set up: its TLS parameters,
    /// a certificate or key file, or the handshake.
    #[error("{0}")]
    Tls(TlsError),
    /// Anything else the client reports (I/O, protocol, URI).
    #[error("{0}")]
    Other(String),
}

/// `NOT_FOUND`: a passive check or a publish named something that does not exist.
pub const NOT_FOUND: u16 = 404;
/// `PRECONDITION_FAILED`: a declaration with other arguments than the existing object's.
pub const PRECONDITION_FAILED: u16 = 406;

impl TransportError {
    /// The AMQP reply code of a refusal.
    pub fn code(&self) -> Option<u16> {
        match self {
            TransportError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the broker answered `NOT_FOUND`.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(NOT_FOUND)
    }
}
