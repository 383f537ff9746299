//! The [`Transport`] over lapin, for a real RabbitMQ.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::uri::AMQPUri;
use lapin::{BasicProperties, Confirmation, ConnectionProperties, ErrorKind};
use rabbit_backoff_core::{ExchangeKind, QueueDecl};

use super::{
    Acker, Channel, Confirm, Connection, Deliveries, Delivery, Lost, LostSignal, PendingConfirm,
    QueueInfo, Settle, Transport, TransportError,
};
use crate::error::redact;
use crate::transport::deep_drop::drop_deep;
use crate::transport::values::arguments_table;

/// The largest frame the runtime negotiates, whatever the broker offers: the
/// broker's default. It bounds how deeply a header can nest (see the I/O
/// thread's stack in `vendor/lapin/PATCHED.md`) and how large the properties
/// of one message can be.
pub const MAX_FRAME_SIZE: u32 = 131_072;

/// A RabbitMQ reached at an `amqp://` (or, with the `tls` feature,
/// `amqps://`) address.
///
/// ```
/// use rabbit_backoff::transport::amqp::AmqpTransport;
/// use rabbit_backoff::transport::Transport;
///
/// let transport = AmqpTransport::new("amqp://guest:secret@127.0.0.1:5672/%2f");
/// assert_eq!(transport.describe(), "amqp://guest:***@127.0.0.1:5672/%2f");
/// ```
#[derive(Debug, Clone)]
pub struct AmqpTransport {
    /// The nodes to try, in order.
    uris: Vec<String>,
    /// The node of the last successful connection: the first one tried next.
    current: Arc<AtomicUsize>,
}

impl AmqpTransport {
    /// A transport to the broker at `uri`, or to the first node that
    /// answers of a comma-separated list of addresses (a cluster):
    /// `amqp://a:5672/%2f,amqp://b:5672/%2f`.
    pub fn new(uri: impl Into<String>) -> Self {
        let uri = uri.into();
        Self::with_nodes(uri.split(',').map(str::trim).filter(|u| !u.is_empty()))
    }

    /// A transport to the first node of `uris` that answers; after a lost
    /// connection it tries the node it was connected to, then the next ones,
    /// in turn.
    pub fn with_nodes<I, S>(uris: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        AmqpTransport {
            uris: uris.into_iter().map(Into::into).collect(),
            current: Arc::default(),
        }
    }

    /// The same nodes in a random order, so that many instances spread over
    /// a cluster instead of all connecting to its first node.
    pub fn shuffled(mut self) -> Self {
        fastrand::shuffle(&mut self.uris);
        self
    }

    /// Connects to the first node that answers, starting from the one of
    /// the last connection; returns the concrete connection.
    pub async fn connect_amqp(&self) -> Result<AmqpConnection, TransportError> {
        if self.uris.is_empty() {
            return Err(TransportError::Other("no broker address given".into()));
        }
        let first = self.current.load(Ordering::Relaxed);
        let mut last_error = None;
        for step in 0..self.uris.len() {
            let index = (first + step) % self.uris.len();
            match connect_node(&self.uris[index]).await {
                Ok(inner) => {
                    self.current.store(index, Ordering::Relaxed);
                    let node = redact(&self.uris[index]);
                    if self.uris.len() > 1 {
                        tracing::info!("connected to {node}");
                    }
                    let (lost, watcher) = watch_for_loss(&inner, &node);
                    return Ok(AmqpConnection {
                        inner,
                        node,
                        lost,
                        watcher,
                    });
                }
                Err(e) => {
                    if self.uris.len() > 1 {
                        tracing::warn!("{} does not answer: {e}", redact(&self.uris[index]));
                    }
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| TransportError::Other("no broker address given".into())))
    }
}

/// Connects to one node, with a `frame_max` of at most [`MAX_FRAME_SIZE`].
async fn connect_node(uri: &str) -> Result<lapin::Connection, TransportError> {
    let mut uri: AMQPUri = uri.parse().map_err(TransportError::Other)?;
    let frame_max = uri.query.frame_max.unwrap_or(MAX_FRAME_SIZE);
    uri.query.frame_max = Some(frame_max.min(MAX_FRAME_SIZE));
    let properties = ConnectionProperties::default().with_connection_name("rabbit-backoff".into());
    lapin::Connection::connect_uri(uri, properties)
        .await
        .map_err(transport_error)
}

impl Transport for AmqpTransport {
    fn connect(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>> {
        Box::pin(async move {
            let connection: Arc<dyn Connection> = Arc::new(self.connect_amqp().await?);
            Ok(connection)
        })
    }

    fn describe(&self) -> String {
        self.uris
            .iter()
            .map(|u| redact(u))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Declares the connection lost as soon as lapin reports an error that
/// ended it (a reset or closed socket, a missed heartbeat, a forced close;
/// not a channel closed by the broker, which lapin reports the same way):
/// lapin fails what it has pending then, but an operation that races with
/// the error could otherwise wait for an answer that never comes.
fn watch_for_loss(
    connection: &lapin::Connection,
    node: &str,
) -> (LostSignal, tokio::task::JoinHandle<()>) {
    let signal = LostSignal::new();
    let mut events = connection.events_listener();
    let status = connection.status().clone();
    let (lost, node) = (signal.clone(), node.to_owned());
    let watcher = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            if let lapin::Event::Error(error) = event
                && (status.errored() || status.closed())
            {
                tracing::warn!("the connection to {node} is lost: {error}");
                lost.lose(error.to_string());
                return;
            }
        }
    });
    (signal, watcher)
}

/// A lapin connection.
pub struct AmqpConnection {
    inner: lapin::Connection,
    /// The node it is connected to, without a password.
    node: String,
    /// Declared once lapin reports the connection failed.
    lost: LostSignal,
    /// Watches lapin's events for that.
    watcher: tokio::task::JoinHandle<()>,
}

impl Drop for AmqpConnection {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl AmqpConnection {
    /// The lapin connection, for what the framework does not wrap.
    pub fn lapin(&self) -> &lapin::Connection {
        &self.inner
    }
}

impl Connection for AmqpConnection {
    fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
        let lost = self.lost.watch();
        Box::pin(async move {
            let inner = lost
                .or_fail(async {
                    let inner = self.inner.create_channel().await.map_err(transport_error)?;
                    inner
                        .confirm_select(ConfirmSelectOptions::default())
                        .await
                        .map_err(transport_error)?;
                    Ok(inner)
                })
                .await?;
            let channel: Arc<dyn Channel> = Arc::new(AmqpChannel { inner, lost });
            Ok(channel)
        })
    }

    fn frame_max(&self) -> u32 {
        self.inner.configuration().frame_max()
    }

    fn node(&self) -> String {
        self.node.clone()
    }

    fn lost(&self) -> Lost {
        self.lost.watch()
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let lost = self.lost.watch();
            let closed = lost.or_fail(async {
                self.inner
                    .close(200, "closing".into())
                    .await
                    .map_err(transport_error)
            });
            if let Err(e) = closed.await {
                tracing::debug!("closing the connection: {e}");
            }
        })
    }
}

/// A lapin channel in confirm mode.
pub struct AmqpChannel {
    inner: lapin::Channel,
    /// Its connection's loss: every operation gives up on it.
    lost: Lost,
}

fn short(s: &str) -> Result<ShortString, TransportError> {
    ShortString::try_new(s).map_err(|_| {
        TransportError::Other(format!(
            "`{}…` is {} bytes long; AMQP names are at most 255 bytes",
            s.chars().take(40).collect::<String>(),
            s.len()
        ))
    })
}

impl AmqpChannel {
    /// Runs an operation unless the connection is lost, and gives up on it
    /// as soon as it is.
    fn guarded<'a, T: Send + 'a>(
        &'a self,
        operation: impl Future<Output = Result<T, TransportError>> + Send + 'a,
    ) -> BoxFuture<'a, Result<T, TransportError>> {
        Box::pin(self.lost.or_fail(operation))
    }
}

fn durable_queue(passive: bool) -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: !passive,
        passive,
        ..QueueDeclareOptions::default()
    }
}

impl Channel for AmqpChannel {
    fn declare_exchange<'a>(
        &'a self,
        name: &'a str,
        kind: ExchangeKind,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        self.guarded(async move {
            let kind = match kind {
                ExchangeKind::Direct => lapin::ExchangeKind::Direct,
                ExchangeKind::Fanout => lapin::ExchangeKind::Fanout,
                ExchangeKind::Topic => lapin::ExchangeKind::Topic,
                ExchangeKind::Headers => lapin::ExchangeKind::Headers,
            };
            let options = ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            };
            self.inner
                .exchange_declare(short(name)?, kind, options, FieldTable::default())
                .await
                .map_err(transport_error)
        })
    }

    fn declare_queue<'a>(
        &'a self,
        queue: &'a QueueDecl,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        self.guarded(async move {
            let arguments = arguments_table(&queue.arguments)
                .map_err(|e| TransportError::Other(e.to_string()))?;
            let declared = self
                .inner
                .queue_declare(short(&queue.name)?, durable_queue(false), arguments)
                .await
                .map_err(transport_error)?;
            Ok(queue_info(&declared))
        })
    }

    fn bind_queue<'a>(
        &'a self,
        queue: &'a str,
        exchange: &'a str,
        routing_key: &'a str,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        self.guarded(async move {
            self.inner
                .queue_bind(
                    short(queue)?,
                    short(exchange)?,
                    short(routing_key)?,
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(transport_error)
        })
    }

    fn check_exchange<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        self.guarded(async move {
            let options = ExchangeDeclareOptions {
                passive: true,
                ..ExchangeDeclareOptions::default()
            };
            self.inner
                .exchange_declare(
                    short(name)?,
                    lapin::ExchangeKind::Direct,
                    options,
                    FieldTable::default(),
                )
                .await
                .map_err(transport_error)
        })
    }

    fn check_queue<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        self.guarded(async move {
            let declared = self
                .inner
                .queue_declare(short(name)?, durable_queue(true), FieldTable::default())
                .await
                .map_err(transport_error)?;
            Ok(queue_info(&declared))
        })
    }

    fn qos(&self, prefetch: u16) -> BoxFuture<'_, Result<(), TransportError>> {
        self.guarded(async move {
            self.inner
                .basic_qos(prefetch, BasicQosOptions::default())
                .await
                .map_err(transport_error)
        })
    }

    fn consume<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
        self.guarded(async move {
            let consumer = self
                .inner
                .basic_consume(
                    short(queue)?,
                    ShortString::from(""),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(transport_error)?;
            let consumer_tag = consumer.tag().to_string();
            let lost = self.lost.clone();
            let deliveries = DroppedOnALargeStack(Some(consumer))
                .map(move |item| item.map(|d| delivery(d, &lost)).map_err(transport_error));
            let stream = UntilLost::new(deliveries, self.lost.clone()).boxed();
            Ok(Deliveries {
                consumer_tag,
                stream,
            })
        })
    }

    fn cancel<'a>(&'a self, consumer_tag: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        self.guarded(async move {
            self.inner
                .basic_cancel(short(consumer_tag)?, BasicCancelOptions::default())
                .await
                .map_err(transport_error)
        })
    }

    fn get<'a>(
        &'a self,
        queue: &'a str,
    ) -> BoxFuture<'a, Result<Option<Delivery>, TransportError>> {
        self.guarded(async move {
            let got = self
                .inner
                .basic_get(short(queue)?, BasicGetOptions { no_ack: false })
                .await
                .map_err(transport_error)?;
            Ok(got.map(|message| delivery(message.delivery, &self.lost)))
        })
    }

    fn publish<'a>(
        &'a self,
        exchange: &'a str,
        routing_key: &'a str,
        body: &'a [u8],
        properties: BasicProperties,
    ) -> BoxFuture<'a, Result<Confirm, TransportError>> {
        Box::pin(async move {
            self.send(exchange, routing_key, body, properties)
                .await?
                .await
        })
    }

    fn send<'a>(
        &'a self,
        exchange: &'a str,
        routing_key: &'a str,
        body: &'a [u8],
        properties: BasicProperties,
    ) -> BoxFuture<'a, Result<PendingConfirm, TransportError>> {
        self.guarded(async move {
            let options = BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            };
            let confirm = self
                .inner
                .basic_publish(
                    short(exchange)?,
                    short(routing_key)?,
                    options,
                    body,
                    properties,
                )
                .await
                .map_err(transport_error)?;
            let lost = self.lost.clone();
            let pending: PendingConfirm = Box::pin(async move {
                lost.or_fail(async { Ok(confirmation(confirm.await.map_err(transport_error)?)) })
                    .await
            });
            Ok(pending)
        })
    }

    fn delete_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        self.guarded(async move {
            self.inner
                .queue_delete(short(name)?, QueueDeleteOptions::default())
                .await
                .map(|_| ())
                .map_err(transport_error)
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let closed = self.lost.or_fail(async {
                self.inner
                    .close(200, "closing".into())
                    .await
                    .map_err(transport_error)
            });
            if let Err(e) = closed.await {
                tracing::debug!("closing a channel: {e}");
            }
        })
    }
}

fn queue_info(queue: &lapin::Queue) -> QueueInfo {
    QueueInfo {
        messages: queue.message_count(),
        consumers: queue.consumer_count(),
    }
}

fn delivery(d: lapin::message::Delivery, lost: &Lost) -> Delivery {
    Delivery {
        exchange: d.exchange.to_string(),
        routing_key: d.routing_key.to_string(),
        redelivered: d.redelivered,
        properties: d.properties,
        data: d.data,
        acker: Acker::new(LapinAcker(d.acker, lost.clone())),
    }
}

/// Settles a lapin delivery, giving up when its connection is lost.
struct LapinAcker(lapin::Acker, Lost);

impl Settle for LapinAcker {
    fn ack(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.1.or_fail(async move {
            match self.0.ack(BasicAckOptions::default()).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(TransportError::Closed("the channel is closed".into())),
                Err(e) => Err(transport_error(e)),
            }
        }))
    }

    fn nack(&self, requeue: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.1.or_fail(async move {
            let options = BasicNackOptions {
                requeue,
                ..BasicNackOptions::default()
            };
            match self.0.nack(options).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(TransportError::Closed("the channel is closed".into())),
                Err(e) => Err(transport_error(e)),
            }
        }))
    }
}

/// A lapin error as a transport error: the broker's refusals keep their
/// reply code and words.
pub(crate) fn transport_error(error: lapin::Error) -> TransportError {
    match error.kind() {
        ErrorKind::ProtocolError(amqp) => TransportError::Refused {
            code: amqp.get_id(),
            text: amqp.get_message().to_string(),
        },
        ErrorKind::InvalidChannelState(..)
        | ErrorKind::InvalidConnectionState(..)
        | ErrorKind::IOError(..)
        | ErrorKind::MissingHeartbeatError => TransportError::Closed(error.to_string()),
        _ => TransportError::Other(error.to_string()),
    }
}

/// What lapin's confirmation says, in the transport's terms.
fn confirmation(confirmation: Confirmation) -> Confirm {
    match confirmation {
        Confirmation::Ack(None) => Confirm::Ack,
        Confirmation::Ack(Some(_)) => Confirm::Returned,
        Confirmation::Nack(_) => Confirm::Nack,
        // Only possible on a channel without confirms: never take it as success.
        Confirmation::NotRequested => Confirm::Nack,
    }
}

/// A consumer's deliveries until its connection is lost; then that error,
/// at once, and the end: the deliveries lapin still buffers could no longer
/// be settled, and handling them would only make duplicates.
struct UntilLost<S> {
    deliveries: S,
    lost: Option<BoxFuture<'static, String>>,
}

impl<S> UntilLost<S> {
    fn new(deliveries: S, lost: Lost) -> Self {
        UntilLost {
            deliveries,
            lost: Some(Box::pin(async move { lost.wait().await })),
        }
    }
}

impl<S> futures_util::Stream for UntilLost<S>
where
    S: futures_util::Stream<Item = Result<Delivery, TransportError>> + Unpin,
{
    type Item = Result<Delivery, TransportError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let Some(lost) = self.lost.as_mut() else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(reason) = lost.as_mut().poll(cx) {
            self.lost = None;
            return Poll::Ready(Some(Err(Lost::error(&reason))));
        }
        self.deliveries.poll_next_unpin(cx)
    }
}

/// A lapin consumer whose buffer of prefetched deliveries is dropped on a
/// thread with a large stack: a prefetched message's headers may nest
/// thousands of levels deep, and dropping them recurses once per level.
struct DroppedOnALargeStack(Option<lapin::Consumer>);

impl futures_util::Stream for DroppedOnALargeStack {
    type Item = lapin::Result<lapin::message::Delivery>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        match self.0.as_mut() {
            Some(consumer) => consumer.poll_next_unpin(cx),
            None => std::task::Poll::Ready(None),
        }
    }
}

impl Drop for DroppedOnALargeStack {
    fn drop(&mut self) {
        if let Some(consumer) = self.0.take() {
            drop_deep(consumer);
        }
    }
}
