//! The faults a test injects through its [`TestBroker`]: refused and
//! returned publishes, closed channels and connections, a cluster that
//! lost its majority.

use rabbit_backoff_runtime::transport::TransportError;

use crate::test_broker::TestBroker;

impl TestBroker {
    /// Fault: the next `times` publishes routed to `queue` are not enqueued
    /// there, and their publishers get [`Confirm::Nack`](rabbit_backoff_runtime::transport::Confirm::Nack) (as from a full
    /// `reject-publish` queue).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::transport::Confirm;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("orders", vec![]).await;
    /// broker.nack_publishes_to("orders", 1);
    /// assert_eq!(broker.publish_json("", "orders", "x").await, Confirm::Nack);
    /// assert_eq!(broker.publish_json("", "orders", "x").await, Confirm::Ack);
    /// assert_eq!(broker.queue_depth("orders"), 1);
    /// # }
    /// ```
    pub fn nack_publishes_to(&self, queue: &str, times: u64) {
        self.shared.nack_publishes_to(queue, times);
    }

    /// Fault: the next `times` publishes routed to `queue` miss it, as if it
    /// were not bound; with no other queue reached, their publishers get
    /// [`Confirm::Returned`](rabbit_backoff_runtime::transport::Confirm::Returned).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::transport::Confirm;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # let broker = TestBroker::new();
    /// # broker.declare_queue("orders", vec![]).await;
    /// broker.return_publishes_to("orders", 1);
    /// assert_eq!(broker.publish_json("", "orders", "x").await, Confirm::Returned);
    /// # }
    /// ```
    pub fn return_publishes_to(&self, queue: &str, times: u64) {
        self.shared.return_publishes_to(queue, times);
    }

    /// Fault: the next `times` publishes on any channel fail with
    /// [`TransportError::Closed`], as when the connection drops mid-publish;
    /// the publishing channel closes (its unsettled deliveries return).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::transport::{Publication, Transport, TransportError};
    /// # use rabbit_backoff::lapin::BasicProperties;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), TransportError> {
    /// let broker = TestBroker::new();
    /// let channel = broker.connect().await?.open_channel().await?;
    /// broker.fail_next_publishes(1);
    /// let message = Publication::new("amq.direct", "k", b"x", BasicProperties::default());
    /// let failed = channel.publish(message).await;
    /// assert!(matches!(failed, Err(TransportError::Closed(_))));
    /// # Ok(())
    /// # }
    /// ```
    pub fn fail_next_publishes(&self, times: u64) {
        self.shared.fail_next_publishes(times);
    }

    /// Fault: closes every open channel with an error, as a channel-level
    /// failure would; connections stay open. Consumers' streams end with
    /// [`TransportError::Closed`]; unsettled deliveries return to their
    /// queues, marked redelivered.
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::transport::Transport;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), rabbit_backoff::transport::TransportError> {
    /// let broker = TestBroker::new();
    /// let connection = broker.connect().await?;
    /// let channel = connection.open_channel().await?;
    /// broker.close_channels();
    /// assert!(channel.check_exchange("amq.direct").await.is_err());
    /// assert!(connection.open_channel().await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub fn close_channels(&self) {
        let error = TransportError::Closed("the broker closed the channel".into());
        for connection in self.connections.open() {
            connection.close_channels(error.clone());
        }
    }

    /// Fault: the broker behaves as a RabbitMQ 4.x node cut off from its
    /// cluster's majority (`true`) or back in it (`false`), for the
    /// runtime's metadata watch: [`Channel::probe_metadata`] gets no
    /// answer meanwhile. Everything else goes on as before.
    ///
    /// [`Channel::probe_metadata`]: rabbit_backoff_runtime::transport::Channel::probe_metadata
    pub fn lose_majority(&self, lost: bool) {
        self.shared
            .majority_lost
            .store(lost, std::sync::atomic::Ordering::Relaxed);
    }

    /// Fault: closes every connection (and its channels) as a broker
    /// restart does, with `CONNECTION_FORCED`; queues and their messages
    /// stay. Clients must reconnect with [`Transport::connect`](rabbit_backoff_runtime::transport::Transport::connect).
    ///
    /// ```
    /// # use rabbit_backoff::testing::TestBroker;
    /// # use rabbit_backoff::transport::Transport;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), rabbit_backoff::transport::TransportError> {
    /// let broker = TestBroker::new();
    /// let connection = broker.connect().await?;
    /// broker.close_connections();
    /// assert!(connection.open_channel().await.is_err());
    /// assert!(broker.connect().await?.open_channel().await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub fn close_connections(&self) {
        let error = TransportError::Closed(
            "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'".into(),
        );
        for connection in self.connections.open() {
            connection.close(error.clone(), true);
        }
    }
}
