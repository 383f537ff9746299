//! [`Message`]: a message in a queue, as a test reads it.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use rabbit_backoff_core::{headers as header_names, read_retry_count};
use rabbit_backoff_runtime::transport::header_view;
use serde::de::DeserializeOwned;

use crate::death::{self, Death};
use crate::stored_message::Stored;

/// A copy of a message in a queue, as [`TestBroker::messages`](crate::TestBroker::messages) shows it.
#[derive(Debug, Clone)]
pub struct Message {
    exchange: String,
    routing_key: String,
    redelivered: bool,
    properties: BasicProperties,
    body: Vec<u8>,
}

impl From<Stored> for Message {
    fn from(m: Stored) -> Self {
        Message {
            exchange: m.exchange,
            routing_key: m.routing_key,
            redelivered: m.redelivered,
            properties: m.properties,
            body: m.body.to_vec(),
        }
    }
}

impl Message {
    /// The body.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::lapin::BasicProperties;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// broker.publish("", "q", b"raw", BasicProperties::default()).await;
    /// assert_eq!(broker.messages("q")[0].body(), b"raw");
    /// # }
    /// ```
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body decoded from JSON.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// broker.publish_json("", "q", &[1, 2, 3]).await;
    /// assert_eq!(broker.messages("q")[0].json::<Vec<u8>>().unwrap(), [1, 2, 3]);
    /// # }
    /// ```
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    /// Its properties, headers included.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// broker.publish_json("", "q", "x").await;
    /// assert_eq!(*broker.messages("q")[0].properties().delivery_mode(), Some(2));
    /// # }
    /// ```
    pub fn properties(&self) -> &BasicProperties {
        &self.properties
    }

    /// Its headers (empty when it has none).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// broker.publish_json("", "q", "x").await;
    /// assert!(broker.messages("q")[0].headers().inner().is_empty());
    /// # }
    /// ```
    pub fn headers(&self) -> FieldTable {
        self.properties.headers().clone().unwrap_or_default()
    }

    /// One header's value.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::lapin::BasicProperties;
    /// # use rabbit_backoff::lapin::types::{AMQPValue, FieldTable};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// let mut headers = FieldTable::default();
    /// headers.insert("x-retry-count".into(), AMQPValue::LongInt(2));
    /// broker.publish("", "q", b"x", BasicProperties::default().with_headers(headers)).await;
    /// assert_eq!(broker.messages("q")[0].header("x-retry-count"), Some(&AMQPValue::LongInt(2)));
    /// # }
    /// ```
    pub fn header(&self, name: &str) -> Option<&AMQPValue> {
        self.properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(name))
    }

    /// One header's value when it is a string (short or long, UTF-8).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::lapin::BasicProperties;
    /// # use rabbit_backoff::lapin::types::{AMQPValue, FieldTable, LongString};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// let mut headers = FieldTable::default();
    /// headers.insert("x-error".into(), AMQPValue::LongString(LongString::from("boom")));
    /// broker.publish("", "q", b"x", BasicProperties::default().with_headers(headers)).await;
    /// assert_eq!(broker.messages("q")[0].header_str("x-error"), Some("boom"));
    /// # }
    /// ```
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(death::string)
    }

    /// Its `message_id`.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::lapin::BasicProperties;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// broker.publish("", "q", b"x", BasicProperties::default().with_message_id("m-1".into())).await;
    /// assert_eq!(broker.messages("q")[0].message_id(), Some("m-1"));
    /// # }
    /// ```
    pub fn message_id(&self) -> Option<&str> {
        self.properties
            .message_id()
            .as_ref()
            .map(ShortString::as_str)
    }

    /// The exchange it was last published (or dead-lettered) to.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// broker.publish_json("", "q", "x").await;
    /// assert_eq!(broker.messages("q")[0].exchange(), "");
    /// # }
    /// ```
    pub fn exchange(&self) -> &str {
        &self.exchange
    }

    /// The routing key it was last published (or dead-lettered) with.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// broker.publish_json("", "q", "x").await;
    /// assert_eq!(broker.messages("q")[0].routing_key(), "q");
    /// # }
    /// ```
    pub fn routing_key(&self) -> &str {
        &self.routing_key
    }

    /// Whether it was delivered before and returned unsettled.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// broker.publish_json("", "q", "x").await;
    /// assert!(!broker.messages("q")[0].redelivered());
    /// # }
    /// ```
    pub fn redelivered(&self) -> bool {
        self.redelivered
    }

    /// `x-retry-count`, read as the runtime reads it (any integer width or
    /// a decimal string; absent or unusable → 0).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::lapin::BasicProperties;
    /// # use rabbit_backoff::lapin::types::{AMQPValue, FieldTable, LongString};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("q", vec![]).await;
    /// let mut headers = FieldTable::default();
    /// headers.insert("x-retry-count".into(), AMQPValue::LongString(LongString::from("3")));
    /// broker.publish("", "q", b"x", BasicProperties::default().with_headers(headers)).await;
    /// broker.publish_json("", "q", "fresh").await;
    /// let counts: Vec<u32> = broker.messages("q").iter().map(|m| m.retry_count()).collect();
    /// assert_eq!(counts, [3, 0]);
    /// # }
    /// ```
    pub fn retry_count(&self) -> u32 {
        let value = self.header(header_names::RETRY_COUNT).map(header_view);
        read_retry_count(value.as_ref()).count
    }

    /// Its `x-death` entries, newest first.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// use rabbit_backoff::topology::Argument;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let broker = TestBroker::new();
    /// broker.declare_queue("dlq", vec![]).await;
    /// broker.declare_queue("short", vec![
    ///     ("x-message-ttl".into(), Argument::Int(1_000)),
    ///     ("x-dead-letter-exchange".into(), Argument::Str("".into())),
    ///     ("x-dead-letter-routing-key".into(), Argument::Str("dlq".into())),
    /// ]).await;
    /// broker.publish_json("", "short", "x").await;
    /// broker.run_until_idle().await;
    ///
    /// let deaths = broker.dead_letters("dlq")[0].x_death();
    /// assert_eq!(deaths.len(), 1);
    /// assert_eq!((deaths[0].queue.as_str(), deaths[0].reason.as_str(), deaths[0].count), ("short", "expired", 1));
    /// # }
    /// ```
    pub fn x_death(&self) -> Vec<Death> {
        death::read(self.properties.headers().as_ref())
    }
}
