//! [`AmqpChannel`]: a lapin channel in publisher-confirm mode, and every
//! operation of the transport's [`Channel`] on it.

use std::future::Future;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use lapin::Confirmation;
use lapin::options::{
    BasicCancelOptions, BasicConsumeOptions, BasicGetOptions, BasicPublishOptions, BasicQosOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
    QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use rabbit_backoff_core::{Binding, ExchangeKind, QueueDecl};

use super::acker::delivery;
use super::close::close_quietly;
use super::lapin_error::transport_error;
use super::until_lost::UntilLost;
use crate::transport::amqp_values::arguments_table;
use crate::transport::channel::Channel;
use crate::transport::confirm::{Confirm, PendingConfirm};
use crate::transport::connection_loss::Lost;
use crate::transport::delivery::{Deliveries, Delivery};
use crate::transport::publication::Publication;
use crate::transport::queue_info::QueueInfo;
use crate::transport::stream_offset::StreamOffset;
use crate::transport::transport_error::TransportError;

/// The consumer argument that says where a stream consumer starts.
const STREAM_OFFSET: &str = "x-stream-offset";

/// A lapin channel in confirm mode.
pub(super) struct AmqpChannel {
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
    /// The channel `inner`, of a connection watched by `lost`.
    pub(super) fn new(inner: lapin::Channel, lost: Lost) -> Self {
        AmqpChannel { inner, lost }
    }

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

    fn declare_exclusive<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        self.guarded(async move {
            let options = QueueDeclareOptions {
                exclusive: true,
                auto_delete: true,
                ..QueueDeclareOptions::default()
            };
            self.inner
                .queue_declare(short(name)?, options, FieldTable::default())
                .await
                .map(drop)
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

/// Declares a server-named, exclusive, auto-delete queue on `channel` and
/// deletes it: a metadata write, which RabbitMQ 4.x commits only with its
/// cluster's majority.
pub(super) async fn probe_metadata(channel: &lapin::Channel) -> Result<(), TransportError> {
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
