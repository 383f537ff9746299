//! The [`Transport`] over lapin, for a real RabbitMQ.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use lapin::Confirmation;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, BasicRejectOptions, ConfirmSelectOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
    QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::uri::AMQPUri;
use rabbit_backoff_core::{Binding, BrokerRelease, ExchangeKind, QueueDecl, connect_order};

use super::{
    Acker, Channel, Confirm, Connection, Deliveries, Delivery, Lost, LostSignal, PendingConfirm,
    Publication, QueueInfo, Settle, StreamOffset, Transport, TransportError,
};
use crate::transport::amqp_values::arguments_table;
use crate::transport::connector::{NodeConnection, connect_node};
use crate::transport::lapin_error::transport_error;
use crate::transport::redact::redact;

pub use crate::transport::frame_guard::MAX_FRAME_SIZE;

/// The consumer argument that says where a stream consumer starts.
const STREAM_OFFSET: &str = "x-stream-offset";

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
    /// Per node, whether a connection left it for having lost its cluster's
    /// majority, and no connection to it has been made since: such nodes
    /// are tried after every other.
    left: Arc<Mutex<Vec<bool>>>,
}

/// How long a close (of a connection, on leaving a node too, or of a
/// channel) waits for the broker to confirm it before the connection or
/// channel is dropped: the close is a courtesy, and a shutdown must not
/// hang on a broker, or a client library, that never answers it.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// in turn. A node the runtime left for having lost its cluster's
    /// majority ([`Connection::leave`]) is tried after every other, until a
    /// connection to it is made again.
    pub fn with_nodes<I, S>(uris: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let uris: Vec<String> = uris.into_iter().map(Into::into).collect();
        AmqpTransport {
            left: Arc::new(Mutex::new(vec![false; uris.len()])),
            uris,
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
    /// the last connection, the nodes left for having lost their cluster's
    /// majority ([`Connection::leave`]) last; returns the concrete
    /// connection.
    pub async fn connect_amqp(&self) -> Result<AmqpConnection, TransportError> {
        if self.uris.is_empty() {
            return Err(TransportError::Other("no broker address given".into()));
        }
        let first = self.current.load(Ordering::Relaxed);
        let order = connect_order(self.uris.len(), first, &lock(&self.left));
        let mut last_error = None;
        for index in order {
            match connect_node(&self.uris[index]).await {
                Ok(NodeConnection { inner, release }) => {
                    self.current.store(index, Ordering::Relaxed);
                    if let Some(left) = lock(&self.left).get_mut(index) {
                        *left = false;
                    }
                    let node = redact(&self.uris[index]);
                    if self.uris.len() > 1 {
                        tracing::info!("connected to {node}");
                    }
                    let (lost, watcher) = watch_for_loss(&inner, &node);
                    return Ok(AmqpConnection {
                        inner,
                        release,
                        node,
                        lost,
                        watcher,
                        index,
                        uris: self.uris.clone(),
                        answered_elsewhere: Mutex::new(None),
                        current: Arc::clone(&self.current),
                        left: Arc::clone(&self.left),
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

    /// Every node's host and port, in order; an address that does not parse
    /// is left out (connecting to it fails, saying why).
    fn probe_addresses(&self) -> Vec<(String, u16)> {
        self.uris
            .iter()
            .filter_map(|uri| uri.parse::<AMQPUri>().ok())
            .map(|uri| (uri.authority.host, uri.authority.port))
            .collect()
    }

    /// To the node of the last AMQP 0-9-1 connection first, then the others
    /// in order.
    #[cfg(feature = "amqp1")]
    fn connect_amqp1(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>> {
        Box::pin(async move {
            let first = self.current.load(Ordering::Relaxed) % self.uris.len().max(1);
            let mut nodes = self.uris.clone();
            nodes.rotate_left(first);
            super::amqp1::connect(&nodes.join(",")).await
        })
    }

    #[cfg(not(feature = "amqp1"))]
    fn connect_amqp1(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>> {
        Box::pin(async {
            Err(TransportError::Other(
                "retry = \"scheduled\" consumes over AMQP 1.0: turn on the feature `amqp1` of \
                 rabbit-backoff"
                    .to_owned(),
            ))
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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
    /// What the node named itself when the connection opened.
    release: Option<BrokerRelease>,
    /// The node it is connected to, without a password.
    node: String,
    /// Declared once lapin reports the connection failed.
    lost: LostSignal,
    /// Watches lapin's events for that.
    watcher: tokio::task::JoinHandle<()>,
    /// Its node's index in its transport's list of `uris`.
    index: usize,
    uris: Vec<String>,
    /// The node that last answered [`Connection::majority_elsewhere`].
    answered_elsewhere: Mutex<Option<usize>>,
    /// Its transport's node of the last connection.
    current: Arc<AtomicUsize>,
    /// Its transport's nodes left for having lost the majority.
    left: Arc<Mutex<Vec<bool>>>,
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

    fn release(&self) -> Option<BrokerRelease> {
        self.release.clone()
    }

    fn lost(&self) -> Lost {
        self.lost.watch()
    }

    /// Asks every other node at once, each on a connection of its own; the
    /// first in the list that answered.
    fn majority_elsewhere(&self, timeout: Duration) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move {
            let asks = self
                .uris
                .iter()
                .enumerate()
                .filter(|(index, _)| *index != self.index)
                .map(|(index, uri)| async move {
                    let answered = tokio::time::timeout(timeout, async {
                        let connection = connect_node(uri).await.ok()?.inner;
                        let channel = connection.create_channel().await.ok()?;
                        probe_metadata(&channel).await.ok()?;
                        Some(connection)
                    })
                    .await;
                    // A node that did not answer in time: its connection,
                    // dropped, closes.
                    let connection = answered.ok().flatten()?;
                    let _ = connection.close(200, "probed".into()).await;
                    Some(index)
                });
            let answered = futures_util::future::join_all(asks)
                .await
                .into_iter()
                .flatten()
                .next();
            *lock(&self.answered_elsewhere) = answered;
            answered.map(|index| redact(&self.uris[index]))
        })
    }

    /// Marks the node as left in its transport, whose next connect starts
    /// with the node that answered elsewhere (or the one after it), declares the connection lost, then closes it, waiting at
    /// most 5 s for the broker's answer.
    fn leave<'a>(&'a self, why: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(left) = lock(&self.left).get_mut(self.index) {
                *left = true;
            }
            let next = lock(&self.answered_elsewhere)
                .take()
                .unwrap_or((self.index + 1) % self.uris.len().max(1));
            let _ = self.current.compare_exchange(
                self.index,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            self.lost.lose(why);
            let closing = self
                .inner
                .close(200, "leaving this node for another".into());
            match tokio::time::timeout(CLOSE_TIMEOUT, closing).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!("closing the connection left: {e}"),
                Err(_) => tracing::debug!(
                    "the node left did not confirm the connection's close in {CLOSE_TIMEOUT:?}"
                ),
            }
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let closing = self.inner.close(200, "closing".into());
            close_quietly(&self.lost.watch(), "the connection", closing).await;
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

    /// Starts a consumer of `queue` with `arguments`, manual acknowledgement.
    fn consume_with<'a>(
        &'a self,
        queue: &'a str,
        arguments: FieldTable,
    ) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
        self.guarded(async move {
            let consumer = self
                .inner
                .basic_consume(
                    short(queue)?,
                    ShortString::from(""),
                    BasicConsumeOptions::default(),
                    arguments,
                )
                .await
                .map_err(transport_error)?;
            let consumer_tag = consumer.tag().to_string();
            let lost = self.lost.clone();
            let deliveries =
                consumer.map(move |item| item.map(|d| delivery(d, &lost)).map_err(transport_error));
            let stream = UntilLost::new(deliveries, self.lost.clone()).boxed();
            Ok(Deliveries {
                consumer_tag,
                stream,
            })
        })
    }
}

impl AmqpChannel {
    /// Publishes with `mandatory`; resolves once the message is handed to
    /// the connection, with its confirmation to await.
    async fn basic_publish(
        &self,
        message: Publication<'_>,
    ) -> Result<lapin::PublisherConfirm, TransportError> {
        let options = BasicPublishOptions {
            mandatory: true,
            ..BasicPublishOptions::default()
        };
        self.inner
            .basic_publish(
                short(message.exchange)?,
                short(message.routing_key)?,
                options,
                message.body,
                message.properties,
            )
            .await
            .map_err(transport_error)
    }
}

impl AmqpChannel {
    /// Declares a durable exchange, or (`passive`) only checks that it exists.
    async fn exchange_declare(
        &self,
        name: &str,
        kind: lapin::ExchangeKind,
        passive: bool,
    ) -> Result<(), TransportError> {
        let options = ExchangeDeclareOptions {
            durable: !passive,
            passive,
            ..ExchangeDeclareOptions::default()
        };
        self.inner
            .exchange_declare(short(name)?, kind, options, FieldTable::default())
            .await
            .map_err(transport_error)
    }

    /// Declares a durable queue with `arguments`, or (`passive`) only checks
    /// that it exists, and reads its depth.
    async fn queue_declare(
        &self,
        name: &str,
        passive: bool,
        arguments: FieldTable,
    ) -> Result<QueueInfo, TransportError> {
        let options = QueueDeclareOptions {
            durable: !passive,
            passive,
            ..QueueDeclareOptions::default()
        };
        let declared = self
            .inner
            .queue_declare(short(name)?, options, arguments)
            .await
            .map_err(transport_error)?;
        Ok(queue_info(&declared))
    }
}

/// What [`AmqpChannel::change_binding`] does to a binding.
#[derive(Clone, Copy)]
enum BindingChange {
    /// `queue.bind`.
    Bind,
    /// `queue.unbind`.
    Unbind,
}

impl AmqpChannel {
    /// Binds `queue` to `exchange` with `routing_key`, or removes that
    /// binding.
    fn change_binding<'a>(
        &'a self,
        change: BindingChange,
        binding: &'a Binding,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        self.guarded(async move {
            let (queue, exchange) = (short(&binding.queue)?, short(&binding.exchange)?);
            let (routing_key, arguments) = (short(&binding.routing_key)?, FieldTable::default());
            let changed = match change {
                BindingChange::Bind => {
                    let options = QueueBindOptions::default();
                    self.inner
                        .queue_bind(queue, exchange, routing_key, options, arguments)
                        .await
                }
                BindingChange::Unbind => {
                    self.inner
                        .queue_unbind(queue, exchange, routing_key, arguments)
                        .await
                }
            };
            changed.map_err(transport_error)
        })
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
                // Not reached with the core pinned exactly (`=0.1.0`);
                // `ExchangeKind` is `#[non_exhaustive]` for services, so
                // Rust wants this arm: the type by its AMQP name.
                other => lapin::ExchangeKind::Custom(other.as_str().to_owned()),
            };
            self.exchange_declare(name, kind, false).await
        })
    }

    fn declare_queue<'a>(
        &'a self,
        queue: &'a QueueDecl,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        self.guarded(async move {
            let arguments = arguments_table(&queue.arguments)?;
            self.queue_declare(&queue.name, false, arguments).await
        })
    }

    fn bind_queue<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), TransportError>> {
        self.change_binding(BindingChange::Bind, binding)
    }

    fn unbind_queue<'a>(
        &'a self,
        binding: &'a Binding,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        self.change_binding(BindingChange::Unbind, binding)
    }

    fn check_exchange<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        // A passive declare checks only the name: the kind is not compared.
        self.guarded(self.exchange_declare(name, lapin::ExchangeKind::Direct, true))
    }

    fn check_queue<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        self.guarded(self.queue_declare(name, true, FieldTable::default()))
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
        self.consume_with(queue, FieldTable::default())
    }

    fn consume_stream<'a>(
        &'a self,
        queue: &'a str,
        offset: StreamOffset,
    ) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
        let mut arguments = FieldTable::default();
        let offset = match offset {
            StreamOffset::First => AMQPValue::LongString("first".into()),
            StreamOffset::At(at) => AMQPValue::LongLongInt(i64::try_from(at).unwrap_or(i64::MAX)),
            StreamOffset::Next => AMQPValue::LongString("next".into()),
        };
        arguments.insert(ShortString::from(STREAM_OFFSET), offset);
        self.consume_with(queue, arguments)
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
        message: Publication<'a>,
    ) -> BoxFuture<'a, Result<Confirm, TransportError>> {
        // One future for the publish and its confirmation.
        self.guarded(async move { confirmed(self.basic_publish(message).await?).await })
    }

    fn send<'a>(
        &'a self,
        message: Publication<'a>,
    ) -> BoxFuture<'a, Result<PendingConfirm, TransportError>> {
        self.guarded(async move {
            let confirm = confirmed(self.basic_publish(message).await?);
            let lost = self.lost.clone();
            let pending: PendingConfirm = Box::pin(async move { lost.or_fail(confirm).await });
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

    /// Declares a server-named, exclusive, auto-delete queue and deletes it.
    fn probe_metadata(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        self.guarded(async move { probe_metadata(&self.inner).await })
    }

    fn purge_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<u32, TransportError>> {
        self.guarded(async move {
            self.inner
                .queue_purge(short(name)?, QueuePurgeOptions::default())
                .await
                .map_err(transport_error)
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let closing = self.inner.close(200, "closing".into());
            close_quietly(&self.lost, "a channel", closing).await;
        })
    }
}

/// Awaits `closing`, lapin's close of a connection or a channel (`what`),
/// unless its connection is `lost` first, for [`CLOSE_TIMEOUT`] at most; a
/// failure is only logged.
async fn close_quietly(lost: &Lost, what: &str, closing: impl Future<Output = lapin::Result<()>>) {
    let closing = lost.or_fail(closing.map(|c| c.map_err(transport_error)));
    match tokio::time::timeout(CLOSE_TIMEOUT, closing).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("closing {what}: {e}"),
        Err(_) => tracing::debug!("closing {what}: not confirmed within {CLOSE_TIMEOUT:?}"),
    }
}

/// Declares a server-named, exclusive, auto-delete queue on `channel` and
/// deletes it: a metadata write, which RabbitMQ 4.x commits only with its
/// cluster's majority.
async fn probe_metadata(channel: &lapin::Channel) -> Result<(), TransportError> {
    let options = QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    let queue = channel
        .queue_declare(ShortString::from(""), options, FieldTable::default())
        .await
        .map_err(transport_error)?;
    channel
        .queue_delete(queue.name().clone(), QueueDeleteOptions::default())
        .await
        .map(|_| ())
        .map_err(transport_error)
}

fn queue_info(queue: &lapin::Queue) -> QueueInfo {
    QueueInfo {
        messages: queue.message_count(),
        consumers: queue.consumer_count(),
    }
}

fn delivery(d: lapin::message::Delivery, lost: &Lost) -> Delivery {
    Delivery {
        exchange: d.exchange.into(),
        routing_key: d.routing_key.into(),
        redelivered: d.redelivered,
        properties: d.properties,
        data: d.data,
        acker: Acker::new(LapinAcker(d.acker, lost.clone(), d.delivery_tag)),
    }
}

/// What lapin's answer to an ack, a nack or a reject says: `false`, the
/// channel was closed and the delivery is not settled.
fn settled(answer: lapin::Result<bool>) -> Result<(), TransportError> {
    match answer {
        Ok(true) => Ok(()),
        Ok(false) => Err(TransportError::Closed("the channel is closed".into())),
        Err(e) => Err(transport_error(e)),
    }
}

/// Settles a lapin delivery (of this tag), giving up when its connection is lost.
struct LapinAcker(lapin::Acker, Lost, u64);

impl Settle for LapinAcker {
    fn delivery_tag(&self) -> u64 {
        self.2
    }

    fn ack(&self, multiple: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(
            self.1
                .or_fail(async move { settled(self.0.ack(BasicAckOptions { multiple }).await) }),
        )
    }

    fn nack(&self, requeue: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.1.or_fail(async move {
            let options = BasicNackOptions {
                requeue,
                ..BasicNackOptions::default()
            };
            settled(self.0.nack(options).await)
        }))
    }

    fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.1.or_fail(async move {
            settled(self.0.reject(BasicRejectOptions { requeue: true }).await)
        }))
    }
}

/// The broker's answer to a publish, once it comes, in the transport's terms.
fn confirmed(
    confirm: lapin::PublisherConfirm,
) -> impl Future<Output = Result<Confirm, TransportError>> {
    confirm.map(|answer| answer.map(confirmation).map_err(transport_error))
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
    watch: Lost,
    /// Waits for the loss while no delivery is ready; `None` once ended.
    lost: Option<BoxFuture<'static, String>>,
}

impl<S> UntilLost<S> {
    fn new(deliveries: S, lost: Lost) -> Self {
        UntilLost {
            deliveries,
            watch: lost.clone(),
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
        if self.lost.is_none() {
            return Poll::Ready(None);
        }
        let reason = match self.watch.reason() {
            Some(reason) => reason,
            None => match self.deliveries.poll_next_unpin(cx) {
                // Waiting for a delivery: wait for the loss too.
                Poll::Pending => match self.lost.as_mut().map(|lost| lost.as_mut().poll(cx)) {
                    Some(Poll::Ready(reason)) => reason,
                    _ => return Poll::Pending,
                },
                ready => return ready,
            },
        };
        self.lost = None;
        Poll::Ready(Some(Err(Lost::error(&reason))))
    }
}
