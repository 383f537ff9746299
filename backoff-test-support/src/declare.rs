//! Queues, exchanges and bindings declared with plain lapin calls, as a
//! hand-written consumer's set-up declares them (durable, with the
//! arguments given), failing the test or bench with the name that was
//! refused; and a consumer's dead-letter index, as its index writer
//! declares it ([`index_streams`]).

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, ExchangeKind, Queue};
use rabbit_backoff_core::Topology;
use rabbit_backoff_runtime::transport::Connection;

/// A long string argument or header value.
pub fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.as_bytes()))
}

/// A table of `pairs`, as a queue's arguments.
pub fn arguments(pairs: &[(&str, AMQPValue)]) -> FieldTable {
    let mut table = FieldTable::default();
    for (name, value) in pairs {
        table.insert((*name).into(), value.clone());
    }
    table
}

/// Declares the durable exchange `name` of `kind`.
pub async fn exchange(channel: &Channel, name: &str, kind: ExchangeKind) {
    channel
        .exchange_declare(
            name.into(),
            kind,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("declare {name}: {e}"));
}

/// Declares the durable queue `name` with `arguments`.
pub async fn queue(channel: &Channel, name: &str, arguments: FieldTable) {
    channel
        .queue_declare(
            name.into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            arguments,
        )
        .await
        .unwrap_or_else(|e| panic!("declare {name}: {e}"));
}

/// The queue `name` as the broker holds it (its ready messages and its
/// consumers), by a passive declare; an error when there is none.
pub async fn try_passive(channel: &Channel, name: &str) -> lapin::Result<Queue> {
    channel
        .queue_declare(
            name.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
}

/// The queue `name` as the broker holds it (its ready messages and its
/// consumers); fails the test or bench, naming the queue, when there is
/// none.
pub async fn passive(channel: &Channel, name: &str) -> Queue {
    try_passive(channel, name)
        .await
        .unwrap_or_else(|e| panic!("passive declare of {name}: {e}"))
}

/// Binds `queue` to `exchange` with `key`.
pub async fn bind(channel: &Channel, queue: &str, exchange: &str, key: &str) {
    channel
        .queue_bind(
            queue.into(),
            exchange.into(),
            key.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("bind {queue} to {exchange}: {e}"));
}

/// Declares the quorum queue `queue` whose `modified` deliveries RabbitMQ
/// 4.3 holds back, dead-lettering at least once
/// (`x-overflow = reject-publish`) through the fanout exchange `dlx`, so
/// that a dead letter keeps its routing key, into the quorum queue `dlq`;
/// `extra` are further arguments of `queue` (a delivery limit, say).
pub async fn held_retry_queue(
    channel: &Channel,
    queue: &str,
    dlx: &str,
    dlq: &str,
    extra: &[(&str, AMQPValue)],
) {
    self::queue(channel, dlq, arguments(&[("x-queue-type", text("quorum"))])).await;
    exchange(channel, dlx, ExchangeKind::Fanout).await;
    bind(channel, dlq, dlx, "").await;
    let mut queue_arguments = arguments(&[
        ("x-queue-type", text("quorum")),
        ("x-dead-letter-exchange", text(dlx)),
        ("x-dead-letter-strategy", text("at-least-once")),
        ("x-overflow", text("reject-publish")),
    ]);
    for (name, value) in extra {
        queue_arguments.insert((*name).into(), value.clone());
    }
    self::queue(channel, queue, queue_arguments).await;
}

/// Declares `topology`'s dead-letter index, its two streams, through the
/// framework's `connection`, as a consumer's index writer declares them
/// (`declare_topology` leaves them to the writer): for a test or bench
/// that writes or reads the index before a consumer ran, or that must not
/// pay for creating them inside what it measures.
pub async fn index_streams(connection: &dyn Connection, topology: &Topology) {
    let channel = connection
        .open_channel()
        .await
        .unwrap_or_else(|e| panic!("a channel to declare the dead-letter index: {e}"));
    for stream in topology.dead_letter_index.queues() {
        channel
            .declare_queue(stream)
            .await
            .unwrap_or_else(|e| panic!("declare {}: {e}", stream.name));
    }
    channel.close().await;
}
