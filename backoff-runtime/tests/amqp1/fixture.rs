//! A quorum queue with its dead-letter queue, published to over AMQP
//! 0-9-1, and what the tests read of a delivery.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use lapin::options::{BasicGetOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel as LapinChannel};
use rabbit_backoff_runtime::transport::{Deliveries, Delivery};
use rabbit_backoff_test_support::broker::{connect, unique};
use rabbit_backoff_test_support::cleanup::Cleanup;
use rabbit_backoff_test_support::declare;
use rabbit_backoff_test_support::publish::publish;

use crate::PATIENCE;

/// A quorum queue dead-lettering into `<queue>.dlq` through `<queue>.dlx`,
/// and a lapin channel in confirm mode to publish to it and read the DLQ.
pub(crate) struct Fixture {
    pub(crate) queue: String,
    pub(crate) dlq: String,
    pub(crate) lapin: lapin::Connection,
    pub(crate) channel: LapinChannel,
    pub(crate) _cleanup: Cleanup,
}

pub(crate) use rabbit_backoff_test_support::declare::text;

impl Fixture {
    pub(crate) async fn new(name: &str) -> Fixture {
        let queue = unique(name);
        let dlx = format!("{queue}.dlx");
        let dlq = format!("{queue}.dlq");
        let cleanup = Cleanup::default().queue(&queue).queue(&dlq).exchange(&dlx);
        let lapin = connect().await;
        let channel = lapin.create_channel().await.expect("a channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        declare::held_retry_queue(&channel, &queue, &dlx, &dlq, &[]).await;
        Fixture {
            queue,
            dlq,
            lapin,
            channel,
            _cleanup: cleanup,
        }
    }

    /// Publishes `body` over AMQP 0-9-1 with the message id `id`, a
    /// content type, a correlation id and two headers, and waits for the
    /// broker's confirm.
    pub(crate) async fn publish(&self, id: &str, body: &[u8]) {
        let mut headers = FieldTable::default();
        headers.insert("tenant".into(), text("eu"));
        headers.insert("attempt".into(), AMQPValue::LongInt(3));
        let properties = BasicProperties::default()
            .with_message_id(ShortString::from(id))
            .with_correlation_id(ShortString::from(format!("corr-{id}")))
            .with_content_type("application/json".into())
            .with_headers(headers);
        let confirm = publish(&self.channel, "", &self.queue, body, properties).await;
        assert!(confirm.is_ack(), "{confirm:?}");
    }

    /// The ready messages of `queue`.
    pub(crate) async fn depth(&self, queue: &str) -> u32 {
        declare::passive(&self.channel, queue).await.message_count()
    }

    /// Waits until `queue` holds `n` ready messages.
    pub(crate) async fn wait_depth(&self, queue: &str, n: u32) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let depth = self.depth(queue).await;
            if depth == n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{queue} holds {depth} ready messages, not {n}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The next message of the dead-letter queue, over AMQP 0-9-1.
    pub(crate) async fn dead_letter(&self) -> lapin::message::BasicGetMessage {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let got = self
                .channel
                .basic_get(self.dlq.as_str().into(), BasicGetOptions { no_ack: true })
                .await
                .expect("basic.get on the DLQ");
            if let Some(message) = got {
                return message;
            }
            assert!(Instant::now() < deadline, "nothing was dead-lettered");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub(crate) async fn close(self) {
        let _ = self.lapin.close(200, "done".into()).await;
    }
}

pub(crate) async fn next(deliveries: &mut Deliveries) -> Delivery {
    tokio::time::timeout(PATIENCE, deliveries.stream.next())
        .await
        .expect("a delivery in time")
        .expect("the stream goes on")
        .expect("a delivery, not an error")
}

pub(crate) fn header<'a>(delivery: &'a Delivery, name: &str) -> Option<&'a AMQPValue> {
    delivery.properties.headers().as_ref()?.inner().get(name)
}

pub(crate) fn header_str(delivery: &Delivery, name: &str) -> Option<String> {
    match header(delivery, name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

pub(crate) fn header_int(delivery: &Delivery, name: &str) -> Option<i64> {
    Some(match header(delivery, name)? {
        AMQPValue::ShortShortInt(v) => (*v).into(),
        AMQPValue::ShortInt(v) => (*v).into(),
        AMQPValue::LongInt(v) => (*v).into(),
        AMQPValue::LongLongInt(v) => *v,
        AMQPValue::ShortShortUInt(v) => (*v).into(),
        AMQPValue::ShortUInt(v) => (*v).into(),
        AMQPValue::LongUInt(v) => (*v).into(),
        AMQPValue::Timestamp(v) => i64::try_from(*v).ok()?,
        _ => return None,
    })
}

pub(crate) fn id(delivery: &Delivery) -> String {
    delivery
        .properties
        .message_id()
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default()
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}
