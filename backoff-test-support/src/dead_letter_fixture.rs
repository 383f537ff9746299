//! A consumer's topology with dead letters in it, on the test broker, as
//! the console's tests (the mounted router's and the CLI command's) read
//! and write them: declared as the framework declares it, filled through
//! its dead-letter exchange, deleted when dropped.

use std::time::{Duration, Instant};

use lapin::options::{BasicPublishOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel};
use rabbit_backoff_core::{ConsumerSpec, IndexBatch, Topology};
use rabbit_backoff_runtime::toolkit::index_entry;

use crate::PATIENCE;
use crate::broker::{connect, unique, url};
use crate::cleanup::Cleanup;

/// A dead letter as the framework writes it.
pub struct DeadLetter {
    /// The message id.
    pub id: &'static str,
    /// `x-error`.
    pub error: String,
    /// `x-dead-letter-reason`.
    pub reason: &'static str,
    /// `x-retry-count`.
    pub retry_count: i64,
    /// The body.
    pub body: String,
    /// User headers.
    pub headers: Vec<(&'static str, &'static str)>,
    /// `x-failed-at`.
    pub failed_at: String,
}

/// A consumer's whole topology, declared as the framework declares it, with
/// dead letters published through its dead-letter exchange; deleted when
/// dropped.
pub struct Fixture {
    /// The consumer, named by [`unique`].
    pub spec: ConsumerSpec,
}

impl Fixture {
    /// A consumer `unique(name)` with retry tiers of 1 s and 2 s and these
    /// dead letters. `name` starts with what tells the tests apart
    /// (`console.page`, `console-crate.mounted`).
    pub async fn new(name: &str, dead_letters: &[DeadLetter]) -> Fixture {
        Fixture::with_delays(name, "1s,2s", dead_letters).await
    }

    /// The same with the retry tiers of `delays` (`"60s,10m"`).
    pub async fn with_delays(name: &str, delays: &str, dead_letters: &[DeadLetter]) -> Fixture {
        let mut spec = ConsumerSpec::new(unique(name), delays.parse().unwrap());
        // Synthetic dead letters through the dead-letter exchange, each with
        // its entry in the dead-letter index, as the consumer writes them.
        spec.queue_type = Some(rabbit_backoff_core::QueueType::Classic);
        let topology = Topology::of(&spec);
        let connection = rabbit_backoff_runtime::connect(&url())
            .await
            .unwrap_or_else(|e| panic!("no RabbitMQ at {} ({e}); run scripts/test.sh", url()));
        rabbit_backoff_runtime::declare_topology(&*connection, &topology)
            .await
            .expect("declare the topology");
        crate::declare::index_streams(&*connection, &topology).await;
        connection.close().await;

        let connection = connect().await;
        let channel = connection.create_channel().await.unwrap();
        channel.confirm_select(Default::default()).await.unwrap();
        let mut entries = IndexBatch::default();
        for letter in dead_letters {
            let mut headers = FieldTable::default();
            headers.insert("x-error".into(), long_string(&letter.error));
            headers.insert("x-failed-at".into(), long_string(&letter.failed_at));
            headers.insert("x-dead-letter-reason".into(), long_string(letter.reason));
            headers.insert("x-original-queue".into(), long_string(&spec.queue));
            headers.insert(
                "x-retry-count".into(),
                AMQPValue::LongLongInt(letter.retry_count),
            );
            for (name, value) in &letter.headers {
                headers.insert((*name).into(), long_string(value));
            }
            // Through the dead-letter exchange, as the consumer sends them.
            let properties = BasicProperties::default()
                .with_message_id(letter.id.into())
                .with_headers(headers.clone());
            entries
                .entries
                .extend(index_entry(&properties, letter.body.len()));
            publish_confirmed(
                &channel,
                &spec.names().dead_letter_exchange,
                &spec.names().dead_letter_routing_key,
                letter.id,
                letter.body.as_bytes(),
                headers,
            )
            .await;
        }
        // Their entries, once the broker confirmed them, in one batch.
        channel
            .basic_publish(
                "".into(),
                spec.names().dead_letter_index().as_str().into(),
                BasicPublishOptions::default(),
                &entries.encode(),
                BasicProperties::default()
                    .with_content_type(IndexBatch::CONTENT_TYPE.into())
                    .with_delivery_mode(2),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        let _ = connection.close(200, "".into()).await;
        Fixture { spec }
    }

    /// The work queue's name.
    pub fn queue(&self) -> &str {
        &self.spec.queue
    }

    /// Messages in the work queue and in the DLQ, asked of the broker itself,
    /// at a moment when no pass holds dead letters: the page reads the queue
    /// again after each write, and a pass's messages are out of the count
    /// while it holds them.
    pub async fn depths(&self) -> (u32, u32) {
        let connection = connect().await;
        let channel = connection.create_channel().await.unwrap();
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let declare = async |queue: &str| {
            channel
                .queue_declare(queue.into(), passive, FieldTable::default())
                .await
                .unwrap()
        };
        let started = Instant::now();
        let dlq = loop {
            let dlq = declare(&self.spec.names().dead_letter_queue).await;
            if dlq.consumer_count() == 0 {
                break dlq.message_count();
            }
            assert!(started.elapsed() < PATIENCE, "a pass never ended");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let work = declare(self.queue()).await.message_count();
        let _ = connection.close(200, "".into()).await;
        (work, dlq)
    }
}

/// A header value as the framework writes text.
pub fn long_string(text: &str) -> AMQPValue {
    AMQPValue::LongString(text.as_bytes().into())
}

/// Publishes `body` as message `id`, with these headers, to `exchange`
/// (`""`: the default one) with `routing_key`, and waits for the broker's
/// confirmation; `channel` is in confirm mode.
pub async fn publish_confirmed(
    channel: &Channel,
    exchange: &str,
    routing_key: &str,
    id: &str,
    body: &[u8],
    headers: FieldTable,
) {
    channel
        .basic_publish(
            exchange.into(),
            routing_key.into(),
            BasicPublishOptions::default(),
            body,
            BasicProperties::default()
                .with_message_id(id.into())
                .with_headers(headers),
        )
        .await
        .unwrap()
        .await
        .unwrap();
}

/// Publishes one message straight to `queue` (through the default
/// exchange, past any dead-letter exchange or retry tier's routing) on a
/// connection of its own, confirmed.
pub async fn publish_to_queue(queue: &str, id: &str, body: &[u8], headers: FieldTable) {
    let connection = connect().await;
    let channel = connection.create_channel().await.unwrap();
    channel.confirm_select(Default::default()).await.unwrap();
    publish_confirmed(&channel, "", queue, id, body, headers).await;
    let _ = connection.close(200, "".into()).await;
}

impl Drop for Fixture {
    fn drop(&mut self) {
        drop(Cleanup::of(&self.spec));
    }
}
