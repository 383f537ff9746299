//! A consumer running on any transport (RabbitMQ or the in-memory broker),
//! and a channel of the test's own through the same seam, to publish, read
//! dead letters and look at queues. The shared suites build on it.

use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff::lapin::BasicProperties;
use rabbit_backoff::transport::{Channel, Confirm, Connection, Delivery, Publication, Transport};
use rabbit_backoff::{ConsumerSpec, HealthWatch, RunningRuntime, RuntimeBuilder};

use super::Cleanup;

/// How long a test waits for a dead letter.
const WAIT: Duration = Duration::from_secs(30);

/// Asserts that the broker behind `transport` has no queue `queue`: a
/// consumer that refused to start declared nothing.
pub async fn assert_not_declared(transport: &dyn Transport, queue: &str) {
    let connection = transport.connect().await.expect("connect");
    let channel = connection.open_channel().await.expect("a channel");
    let work_queue = channel.check_queue(queue).await;
    assert!(
        work_queue.as_ref().is_err_and(|e| e.is_not_found()),
        "nothing declared: {work_queue:?}"
    );
    connection.close().await;
}

pub struct OnBroker {
    pub spec: ConsumerSpec,
    running: Option<RunningRuntime>,
    connection: Arc<dyn Connection>,
    channel: Arc<dyn Channel>,
    _cleanup: Option<Cleanup>,
}

impl OnBroker {
    /// Starts the one consumer of `builder` on `transport`; `shared` when
    /// the broker is the real one, whose objects a test must delete.
    pub async fn start(
        transport: Arc<dyn Transport>,
        shared: bool,
        builder: RuntimeBuilder,
    ) -> Self {
        let connection = transport.connect().await.expect("connect");
        let channel = connection.open_channel().await.expect("a channel");
        let runtime = builder
            .transport(transport)
            .handle_signals(false)
            .shutdown_grace(Duration::from_secs(5))
            .build()
            .expect("a valid runtime");
        let spec = runtime.specs().next().cloned().expect("one consumer");
        let cleanup = shared.then(|| Cleanup::of(&spec));
        let running = runtime.start().await.expect("the consumer starts");
        OnBroker {
            spec,
            running: Some(running),
            connection,
            channel,
            _cleanup: cleanup,
        }
    }

    pub fn health(&self) -> HealthWatch {
        self.running.as_ref().expect("running").health()
    }

    /// Publishes JSON to the consumer's work exchange, confirmed.
    pub async fn publish_json<T: serde::Serialize>(&self, value: &T, properties: BasicProperties) {
        let body = serde_json::to_vec(value).unwrap();
        self.publish_raw(&body, properties).await;
    }

    pub async fn publish_raw(&self, body: &[u8], properties: BasicProperties) {
        let names = self.spec.names();
        self.publish_via(&names.exchange, &names.routing_key, body, properties)
            .await;
    }

    /// Publishes `body` to `exchange` with `routing_key`, confirmed.
    pub async fn publish_via(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) {
        let confirm = self
            .channel
            .publish(Publication::new(exchange, routing_key, body, properties))
            .await
            .expect("publish");
        assert_eq!(confirm, Confirm::Ack);
    }

    /// Takes the next dead letter (acked), waiting for one.
    pub async fn next_dead_letter(&self) -> Delivery {
        let queue = self.spec.names().dead_letter_queue;
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if let Some(delivery) = self.channel.get(&queue).await.expect("basic.get") {
                delivery.acker.ack().await.expect("ack");
                return delivery;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no dead letter in {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The dead letters (acked) of the jobs `ids`, in the order of their ids,
    /// waited for; fails the test, naming the jobs it found, when they are
    /// the dead letters of other jobs.
    pub async fn dead_jobs<const N: usize>(&self, ids: [u64; N]) -> [BasicProperties; N] {
        let mut dead = Vec::new();
        for _ in 0..N {
            let letter = self.next_dead_letter().await;
            let job: super::Job = serde_json::from_slice(&letter.data).expect("a job");
            dead.push((job.id, letter.properties));
        }
        dead.sort_by_key(|(id, _)| *id);
        let found: Vec<u64> = dead.iter().map(|d| d.0).collect();
        assert_eq!(found, ids, "dead letters of jobs {ids:?}, not {found:?}");
        let properties: Vec<BasicProperties> = dead.into_iter().map(|d| d.1).collect();
        properties
            .try_into()
            .unwrap_or_else(|_| unreachable!("as many as there are ids"))
    }

    pub async fn depth(&self, queue: &str) -> u32 {
        self.channel
            .check_queue(queue)
            .await
            .expect("the queue")
            .messages
    }

    /// Whether `exchange` exists (asked on a channel of its own).
    #[allow(dead_code)]
    pub async fn exchange_exists(&self, exchange: &str) -> bool {
        let channel = self.connection.open_channel().await.expect("a channel");
        let exists = channel.check_exchange(exchange).await.is_ok();
        channel.close().await;
        exists
    }

    /// The depth of `queue`, or `None` when it does not exist (asked on a
    /// channel of its own: a refused passive declare closes its channel).
    #[allow(dead_code)]
    pub async fn try_depth(&self, queue: &str) -> Option<u32> {
        let channel = self.connection.open_channel().await.expect("a channel");
        let depth = channel.check_queue(queue).await.ok().map(|q| q.messages);
        channel.close().await;
        depth
    }

    /// Stops the consumer: whatever it had not acked goes back to its queue.
    pub async fn stop_consumer(&mut self) {
        if let Some(running) = self.running.take() {
            running.stop().await.expect("stops cleanly");
        }
    }

    pub async fn stop(mut self) {
        self.stop_consumer().await;
        self.channel.close().await;
        self.connection.close().await;
    }
}
