//! [`TestBroker`]: the handle a test holds to publish, inspect queues,
//! inject faults and let virtual time run.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use lapin::BasicProperties;
use lapin::types::ShortString;
use rabbit_backoff_core::Argument;
use rabbit_backoff_runtime::transport::{Confirm, Connection, Transport, TransportError};
use serde::Serialize;
use tokio::time::Instant;

use crate::broker_shared::BrokerShared;
use crate::connection::{Connections, MemoryConnection};
use crate::idle_timeout::{QueueActivity, StillBusy};
use crate::lock::read;
use crate::message::Message;
use crate::queue::Queue;
use crate::release::Release;

/// How long [`TestBroker::run_until_idle`] lets time run at most.
pub const IDLE_LIMIT: Duration = Duration::from_secs(3600);

/// An in-memory RabbitMQ for tests: exchanges, queues, TTLs, dead-lettering,
/// publisher confirms and consumers behave as in RabbitMQ 3.10, or where
/// releases differ as in the [`Release`] given to
/// [`emulating`](Self::emulating), on tokio's clock. Cloning gives another
/// handle to the same broker; each [`Transport::connect`] opens a new
/// connection to it.
///
/// ```
/// use rabbit_backoff::testing::TestBroker;
/// use rabbit_backoff::transport::{Confirm, Transport};
/// use rabbit_backoff::ExchangeKind;
/// use rabbit_backoff::topology::{Binding, QueueDecl};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), rabbit_backoff::transport::TransportError> {
/// let broker = TestBroker::new();
/// let channel = broker.connect().await?.open_channel().await?;
/// channel.declare_exchange("orders", ExchangeKind::Direct).await?;
/// channel
///     .declare_queue(&QueueDecl::new("orders"))
///     .await?;
/// channel.bind_queue(&Binding::new("orders", "orders", "orders")).await?;
///
/// let confirm = broker.publish_json("orders", "orders", &serde_json::json!({"id": 7})).await;
/// assert_eq!(confirm, Confirm::Ack);
/// assert_eq!(broker.queue_depth("orders"), 1);
/// assert_eq!(broker.messages("orders")[0].json::<serde_json::Value>().unwrap()["id"], 7);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct TestBroker {
    pub(crate) shared: Arc<BrokerShared>,
    pub(crate) connections: Arc<Connections>,
}

impl Default for TestBroker {
    fn default() -> Self {
        TestBroker::new()
    }
}

impl fmt::Debug for TestBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestBroker")
            .field("queues", &self.queue_names())
            .finish_non_exhaustive()
    }
}

impl Transport for TestBroker {
    fn connect(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>> {
        Box::pin(async move {
            let connection = MemoryConnection::open(&self.shared, &self.connections);
            Ok(Arc::new(connection) as Arc<dyn Connection>)
        })
    }

    fn describe(&self) -> String {
        "the in-memory test broker".to_owned()
    }
}

impl TestBroker {
    /// An empty broker with RabbitMQ's predeclared exchanges (the default
    /// exchange `""`, `amq.direct`, `amq.fanout`, `amq.topic`, `amq.headers`,
    /// `amq.match`).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// let broker = TestBroker::new();
    /// assert!(broker.exchange_exists("amq.topic"));
    /// assert!(broker.queue_names().is_empty());
    /// ```
    pub fn new() -> Self {
        TestBroker::emulating(Release::default())
    }

    /// An empty broker that behaves as `release` where releases differ
    /// ([`Release`]): with [`Release::V4_3`], quorum queues hold deliveries
    /// back, so consumers with `retry = "scheduled"` or `"delayed"` run on
    /// it.
    ///
    /// ```
    /// use rabbit_backoff::testing::{Release, TestBroker};
    /// use rabbit_backoff::topology::{Argument, QueueDecl};
    /// use rabbit_backoff::transport::Transport;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), rabbit_backoff::transport::TransportError> {
    /// let broker = TestBroker::emulating(Release::V4_3);
    /// let channel = broker.connect().await?.open_channel().await?;
    /// // 4.3 knows the delayed retry arguments as a quorum queue's only.
    /// let classic = QueueDecl::new("jobs")
    ///     .with_argument("x-delayed-retry-type", Argument::Str("failed".into()));
    /// let refused = channel.declare_queue(&classic).await.unwrap_err();
    /// assert!(refused.to_string().contains("invalid arg 'x-delayed-retry-type'"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn emulating(release: Release) -> Self {
        TestBroker {
            shared: Arc::new(BrokerShared::new(release)),
            connections: Arc::default(),
        }
    }

    /// The release it behaves as.
    pub fn release(&self) -> Release {
        self.shared.release
    }

    /// Publishes as a client on a confirm channel does, with `mandatory`,
    /// and returns the broker's confirm.
    ///
    /// # Panics
    ///
    /// When the exchange does not exist or `properties` has an invalid
    /// `expiration` (RabbitMQ would close the channel): a mistake in the test.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::transport::Confirm;
    /// # use rabbit_backoff::lapin::BasicProperties;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let broker = TestBroker::new();
    /// // Nothing is bound: the message comes back.
    /// let confirm = broker.publish("amq.direct", "nowhere", b"hi", BasicProperties::default()).await;
    /// assert_eq!(confirm, Confirm::Returned);
    /// # }
    /// ```
    pub async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: impl AsRef<[u8]>,
        properties: BasicProperties,
    ) -> Confirm {
        match self
            .shared
            .publish(exchange, routing_key, body.as_ref(), properties)
        {
            Ok(confirm) => confirm,
            Err(error) => panic!("TestBroker::publish to exchange '{exchange}': {error}"),
        }
    }

    /// Publishes `value` as JSON the way a service would: persistent,
    /// `content_type = application/json`, a fresh `message_id`.
    ///
    /// # Panics
    ///
    /// As [`publish`](Self::publish), and when `value` cannot be serialized.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("orders", vec![]).await;
    /// broker.publish_json("", "orders", &serde_json::json!({"id": 1})).await;
    /// let message = &broker.messages("orders")[0];
    /// assert_eq!(message.properties().content_type().as_ref().unwrap().as_str(), "application/json");
    /// assert!(message.message_id().is_some());
    /// # }
    /// ```
    pub async fn publish_json<T: Serialize + ?Sized>(
        &self,
        exchange: &str,
        routing_key: &str,
        value: &T,
    ) -> Confirm {
        let body = match serde_json::to_vec(value) {
            Ok(body) => body,
            Err(error) => panic!("TestBroker::publish_json: cannot serialize the value: {error}"),
        };
        let properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type(ShortString::from("application/json"))
            .with_message_id(ShortString::from(uuid::Uuid::new_v4().to_string()));
        self.publish(exchange, routing_key, body, properties).await
    }

    /// Declares a queue with arguments, as a channel would, for tests that
    /// set up their own topology.
    ///
    /// # Panics
    ///
    /// When RabbitMQ would refuse the declaration (see
    /// [`Channel::declare_queue`](rabbit_backoff_runtime::transport::Channel::declare_queue)).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// use rabbit_backoff::topology::Argument;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let broker = TestBroker::new();
    /// broker.declare_queue("parking", vec![("x-message-ttl".into(), Argument::Int(5_000))]).await;
    /// assert_eq!(broker.queue_arguments("parking").unwrap().len(), 1);
    /// # }
    /// ```
    pub async fn declare_queue(&self, name: &str, arguments: Vec<(String, Argument)>) {
        let decl = rabbit_backoff_core::QueueDecl::new(name).with_arguments(arguments);
        if let Err(error) = self.shared.declare_queue(&decl) {
            panic!("TestBroker::declare_queue('{name}'): {error}");
        }
    }

    /// The ready messages of a queue, in delivery order, without consuming
    /// them (messages due to expire at the head are expired first).
    ///
    /// # Panics
    ///
    /// When the queue does not exist, naming the queues that do.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("orders", vec![]).await;
    /// broker.publish_json("", "orders", "first").await;
    /// broker.publish_json("", "orders", "second").await;
    /// let bodies: Vec<String> = broker.messages("orders").iter().map(|m| m.json().unwrap()).collect();
    /// assert_eq!(bodies, ["first", "second"]);
    /// assert_eq!(broker.queue_depth("orders"), 2);
    /// # }
    /// ```
    pub fn messages(&self, queue: &str) -> Vec<Message> {
        let queue = self.existing(queue);
        queue.expire_due();
        queue.snapshot().into_iter().map(Message::from).collect()
    }

    /// [`messages`](Self::messages), for a dead-letter queue.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("orders.dlq", vec![]).await;
    /// assert!(broker.dead_letters("orders.dlq").is_empty());
    /// # }
    /// ```
    pub fn dead_letters(&self, queue: &str) -> Vec<Message> {
        self.messages(queue)
    }

    /// How many messages of a queue are ready (not delivered and unsettled).
    ///
    /// # Panics
    ///
    /// When the queue does not exist.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// broker.declare_queue("orders", vec![]).await;
    /// assert_eq!(broker.queue_depth("orders"), 0);
    /// # }
    /// ```
    pub fn queue_depth(&self, queue: &str) -> usize {
        let queue = self.existing(queue);
        queue.expire_due();
        queue.activity().ready
    }

    /// How many deliveries of a queue are out and not yet settled.
    ///
    /// # Panics
    ///
    /// When the queue does not exist.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// broker.declare_queue("orders", vec![]).await;
    /// assert_eq!(broker.unacked_count("orders"), 0);
    /// # }
    /// ```
    pub fn unacked_count(&self, queue: &str) -> usize {
        self.existing(queue).activity().unacked
    }

    /// How many consumers a queue has.
    ///
    /// # Panics
    ///
    /// When the queue does not exist.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// broker.declare_queue("orders", vec![]).await;
    /// assert_eq!(broker.consumer_count("orders"), 0);
    /// # }
    /// ```
    pub fn consumer_count(&self, queue: &str) -> usize {
        self.existing(queue).activity().consumers
    }

    /// How many messages a queue holds back until a time of their own
    /// (RabbitMQ 4.3's delayed retries and `modified` deliveries with
    /// `x-opt-delivery-time`): neither ready nor unacknowledged.
    ///
    /// # Panics
    ///
    /// When the queue does not exist.
    ///
    /// ```
    /// # use rabbit_backoff::testing::{Release, TestBroker};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::emulating(Release::V4_3);
    /// broker.declare_queue("orders", vec![]).await;
    /// assert_eq!(broker.held_count("orders"), 0);
    /// # }
    /// ```
    pub fn held_count(&self, queue: &str) -> usize {
        let queue = self.existing(queue);
        queue.expire_due();
        queue.activity().held
    }

    /// Drops every ready message of a queue; how many there were.
    ///
    /// # Panics
    ///
    /// When the queue does not exist.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("orders", vec![]).await;
    /// broker.publish_json("", "orders", "x").await;
    /// assert_eq!(broker.purge("orders"), 1);
    /// assert_eq!(broker.queue_depth("orders"), 0);
    /// # }
    /// ```
    pub fn purge(&self, queue: &str) -> usize {
        self.existing(queue).purge()
    }

    /// The names of all queues, sorted.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// broker.declare_queue("b", vec![]).await;
    /// broker.declare_queue("a", vec![]).await;
    /// assert_eq!(broker.queue_names(), ["a", "b"]);
    /// # }
    /// ```
    pub fn queue_names(&self) -> Vec<String> {
        let mut names: Vec<String> = read(&self.shared.topology).queues.keys().cloned().collect();
        names.sort();
        names
    }

    /// The names of all exchanges but the default one, sorted.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// let broker = TestBroker::new();
    /// assert!(broker.exchange_names().contains(&"amq.direct".to_owned()));
    /// ```
    pub fn exchange_names(&self) -> Vec<String> {
        let mut names: Vec<String> = read(&self.shared.topology)
            .exchanges
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// Whether a queue exists.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// assert!(!TestBroker::new().queue_exists("orders"));
    /// ```
    pub fn queue_exists(&self, queue: &str) -> bool {
        self.shared.queue(queue).is_some()
    }

    /// Whether an exchange exists (the default exchange `""` always does).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// assert!(TestBroker::new().exchange_exists(""));
    /// ```
    pub fn exchange_exists(&self, exchange: &str) -> bool {
        self.shared.check_exchange(exchange).is_ok()
    }

    /// The arguments a queue was declared with, or `None` when it does not
    /// exist.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// assert!(TestBroker::new().queue_arguments("orders").is_none());
    /// ```
    pub fn queue_arguments(&self, queue: &str) -> Option<Vec<(String, Argument)>> {
        self.shared.queue(queue).map(|q| q.arguments.clone())
    }

    /// The bindings of an exchange as (queue, routing key), in the order
    /// they were made; empty when the exchange does not exist.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// assert!(TestBroker::new().bindings("amq.direct").is_empty());
    /// ```
    pub fn bindings(&self, exchange: &str) -> Vec<(String, String)> {
        read(&self.shared.topology)
            .exchanges
            .get(exchange)
            .map(|x| {
                x.bindings
                    .iter()
                    .map(|b| (b.queue.clone(), b.routing_key.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Lets tokio's time run until the broker is idle: no delivery is out
    /// unsettled, no queue with consumers holds a ready message, and no
    /// queue holds a message whose TTL is running at its head. Messages
    /// resting in a queue nobody consumes (a dead-letter queue) do not
    /// count. Under `#[tokio::test(start_paused = true)]` a 5s, 15s, 60s
    /// retry schedule plays out in milliseconds.
    ///
    /// It gives up after [`IDLE_LIMIT`] (one hour) of tokio time or of wall
    /// time, whichever comes first, so that a consumer that never settles
    /// cannot hang a test; use
    /// [`run_until_idle_within`](Self::run_until_idle_within) to know.
    /// Start consumers before calling it: a queue without consumers is idle.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// use rabbit_backoff::topology::Argument;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let broker = TestBroker::new();
    /// broker.declare_queue("parked", vec![
    ///     ("x-message-ttl".into(), Argument::Int(60_000)),
    ///     ("x-dead-letter-exchange".into(), Argument::Str("".into())),
    ///     ("x-dead-letter-routing-key".into(), Argument::Str("back".into())),
    /// ]).await;
    /// broker.declare_queue("back", vec![]).await;
    /// broker.publish_json("", "parked", "x").await;
    ///
    /// let started = tokio::time::Instant::now();
    /// broker.run_until_idle().await;
    /// assert!(started.elapsed() >= std::time::Duration::from_secs(60));
    /// assert_eq!(broker.queue_depth("back"), 1);
    /// # }
    /// ```
    pub async fn run_until_idle(&self) {
        let _ = self.run_until_idle_within(IDLE_LIMIT).await;
    }

    /// [`run_until_idle`](Self::run_until_idle) with a limit: `Err` says
    /// what was still going on when `limit` (of tokio time or of wall time)
    /// ran out.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let broker = TestBroker::new();
    /// assert!(broker.run_until_idle_within(Duration::from_secs(1)).await.is_ok());
    /// # }
    /// ```
    pub async fn run_until_idle_within(&self, limit: Duration) -> Result<(), StillBusy> {
        let started = Instant::now();
        let wall = std::time::Instant::now();
        loop {
            // Runnable tasks (consumers) go first; time does not move.
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            let now = Instant::now();
            let mut busy = Vec::new();
            let mut next_deadline: Option<Instant> = None;
            let mut working = false;
            for queue in self.shared.queues() {
                queue.expire_due();
                let a = queue.activity();
                let waiting = a.next_deadline.is_some();
                let feeding = a.ready > 0 && a.consumers > 0;
                if a.unacked > 0 || feeding || waiting {
                    working |= a.unacked > 0 || feeding;
                    if let Some(at) = a.next_deadline {
                        next_deadline = Some(next_deadline.map_or(at, |n| n.min(at)));
                    }
                    busy.push(QueueActivity {
                        queue: queue.name.clone(),
                        ready: a.ready,
                        unacked: a.unacked,
                        waiting_for_ttl: a.with_deadline,
                        held: a.held,
                    });
                }
            }
            if busy.is_empty() {
                return Ok(());
            }
            let waited = now.saturating_duration_since(started);
            if waited >= limit || wall.elapsed() >= limit {
                busy.sort_by(|a, b| a.queue.cmp(&b.queue));
                return Err(StillBusy {
                    waited,
                    queues: busy,
                });
            }
            // While consumers work, check often at first, then less (1% of
            // the time waited so far); never sleep past the next expiry.
            let step = match (working, next_deadline) {
                (false, Some(at)) => at.saturating_duration_since(now),
                (_, at) => {
                    let step =
                        (waited / 100).clamp(Duration::from_millis(1), Duration::from_secs(1));
                    at.map_or(step, |at| step.min(at.saturating_duration_since(now)))
                }
            }
            .max(Duration::from_millis(1));
            tokio::time::sleep(step).await;
        }
    }

    fn existing(&self, queue: &str) -> Arc<Queue> {
        match self.shared.queue(queue) {
            Some(q) => q,
            None => panic!(
                "the test broker has no queue '{queue}' (queues: {:?})",
                self.queue_names()
            ),
        }
    }
}
