//! A copy of a failed message that the broker refuses (`basic.nack`): the
//! consumer publishes the next copies on a new channel, and goes on
//! consuming on the channel it had. RabbitMQ 3.10 can go on refusing every
//! publish to a quorum queue on a channel that first published to it while
//! its leader was moving; a new channel reaches the new leader.
//!
//! The broker is wrapped in a transport that records, for every publish and
//! every `basic.consume`, which channel it went through.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::BoxFuture;
use rabbit_backoff::ExchangeKind;
use rabbit_backoff::prelude::*;
use rabbit_backoff::testing::TestBroker;
use rabbit_backoff::transport::{
    Channel, Confirm, Connection, Deliveries, Delivery, Lost, PendingConfirm, Publication,
    QueueInfo, Transport, TransportError,
};
use rabbit_backoff_core::{Binding, QueueDecl};

/// What went through which channel (channels numbered from 0 in the order
/// they were opened).
#[derive(Default)]
struct Journal {
    channels: AtomicUsize,
    /// (channel, routing key) of every publish.
    publishes: Mutex<Vec<(usize, String)>>,
    /// (channel, queue) of every `basic.consume`.
    consumes: Mutex<Vec<(usize, String)>>,
}

impl Journal {
    fn publishes(&self) -> Vec<(usize, String)> {
        self.publishes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn consumes(&self) -> Vec<(usize, String)> {
        self.consumes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The broker, with every channel recorded in the journal.
struct Recorded {
    broker: TestBroker,
    journal: Arc<Journal>,
}

impl Transport for Recorded {
    fn connect(&self) -> BoxFuture<'_, Result<Arc<dyn Connection>, TransportError>> {
        Box::pin(async move {
            let inner = self.broker.connect().await?;
            let connection: Arc<dyn Connection> = Arc::new(RecordedConnection {
                inner,
                journal: Arc::clone(&self.journal),
            });
            Ok(connection)
        })
    }

    fn describe(&self) -> String {
        self.broker.describe()
    }
}

struct RecordedConnection {
    inner: Arc<dyn Connection>,
    journal: Arc<Journal>,
}

impl Connection for RecordedConnection {
    fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
        Box::pin(async move {
            let inner = self.inner.open_channel().await?;
            let channel: Arc<dyn Channel> = Arc::new(RecordedChannel {
                id: self.journal.channels.fetch_add(1, Ordering::SeqCst),
                inner,
                journal: Arc::clone(&self.journal),
            });
            Ok(channel)
        })
    }

    fn frame_max(&self) -> u32 {
        self.inner.frame_max()
    }

    fn lost(&self) -> Lost {
        self.inner.lost()
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.inner.close()
    }
}

struct RecordedChannel {
    id: usize,
    inner: Arc<dyn Channel>,
    journal: Arc<Journal>,
}

impl RecordedChannel {
    fn record_publish(&self, routing_key: &str) {
        self.journal
            .publishes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((self.id, routing_key.to_owned()));
    }
}

impl Channel for RecordedChannel {
    fn declare_exchange<'a>(
        &'a self,
        name: &'a str,
        kind: ExchangeKind,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        self.inner.declare_exchange(name, kind)
    }

    fn declare_queue<'a>(
        &'a self,
        queue: &'a QueueDecl,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        self.inner.declare_queue(queue)
    }

    fn bind_queue<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), TransportError>> {
        self.inner.bind_queue(binding)
    }

    fn check_exchange<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        self.inner.check_exchange(name)
    }

    fn check_queue<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        self.inner.check_queue(name)
    }

    fn qos(&self, prefetch: u16) -> BoxFuture<'_, Result<(), TransportError>> {
        self.inner.qos(prefetch)
    }

    fn consume<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
        self.journal
            .consumes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((self.id, queue.to_owned()));
        self.inner.consume(queue)
    }

    fn cancel<'a>(&'a self, consumer_tag: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        self.inner.cancel(consumer_tag)
    }

    fn get<'a>(
        &'a self,
        queue: &'a str,
    ) -> BoxFuture<'a, Result<Option<Delivery>, TransportError>> {
        self.inner.get(queue)
    }

    fn publish<'a>(
        &'a self,
        message: Publication<'a>,
    ) -> BoxFuture<'a, Result<Confirm, TransportError>> {
        self.record_publish(message.routing_key);
        self.inner.publish(message)
    }

    fn send<'a>(
        &'a self,
        message: Publication<'a>,
    ) -> BoxFuture<'a, Result<PendingConfirm, TransportError>> {
        self.record_publish(message.routing_key);
        self.inner.send(message)
    }

    fn delete_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        self.inner.delete_queue(name)
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.inner.close()
    }
}

#[derive(Debug, Classify)]
enum JobError {
    Busy,
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("busy")
    }
}

/// How many times the handler ran.
#[derive(Default)]
struct Attempts(AtomicU32);

/// Fails its first two attempts, succeeds on the third. On classic queues:
/// an original whose copy was refused goes back with a requeue, so the
/// only publishes are retry copies (a quorum work queue takes it back as a
/// copy, `tests/semantics/`).
#[backoff_consumer(queue = "jobs", delays = "5s", queue_type = "classic")]
async fn job(_id: u32, attempts: State<Attempts>) -> Result<(), JobError> {
    if attempts.0.fetch_add(1, Ordering::SeqCst) < 2 {
        return Err(JobError::Busy);
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_refused_copy_moves_the_next_copies_to_a_new_channel() {
    let broker = TestBroker::new();
    let journal = Arc::new(Journal::default());
    let attempts = Arc::new(Attempts::default());
    let running = Runtime::builder()
        .transport(Recorded {
            broker: broker.clone(),
            journal: Arc::clone(&journal),
        })
        .state_arc(Arc::clone(&attempts))
        .handle_signals(false)
        .consumer(job)
        .start()
        .await
        .expect("starts on the in-memory broker");

    broker.nack_publishes_to("jobs.retry_5000ms", 1);
    assert_eq!(broker.publish_json("jobs", "jobs", &1).await, Confirm::Ack);
    broker.run_until_idle().await;

    // Attempt 1 fails: its copy is refused and the original requeued.
    // Attempt 2 fails: its copy is confirmed. Attempt 3, 5 s later, succeeds.
    assert_eq!(attempts.0.load(Ordering::SeqCst), 3);
    let consumes = journal.consumes();
    assert_eq!(
        consumes.len(),
        1,
        "consumed once, never again: {consumes:?}"
    );
    let (consuming, ref queue) = consumes[0];
    assert_eq!(queue, "jobs");
    let copies: Vec<usize> = journal
        .publishes()
        .into_iter()
        .map(|(channel, routing_key)| {
            assert_eq!(routing_key, "jobs.retry_5000ms", "only retry copies");
            channel
        })
        .collect();
    assert_eq!(copies.len(), 2, "one refused copy, one confirmed");
    assert_eq!(
        copies[0], consuming,
        "the first copy goes out on the channel the message came from"
    );
    assert_ne!(
        copies[1], consuming,
        "after a refusal, copies go to a new channel"
    );
    assert_eq!(broker.queue_depth("jobs"), 0);
    assert_eq!(broker.queue_depth("jobs.retry_5000ms"), 0);
    assert!(broker.dead_letters("jobs.dlq").is_empty());
    running.stop().await.expect("stops");
}
