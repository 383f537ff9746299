//! Start-up tells the truth: a start that fails returns its error from
//! `start()` every time; a consumer refused for its broker declares nothing,
//! streams included; a node that cannot hold retries back, met on a
//! failover, is waited out instead of ending the consumer for good.
//!
//! The refusals need a broker before RabbitMQ 4.3 and the failover a 4.3
//! node beside it: [`url_before_4_3`] and [`url_4_3`], whatever broker the
//! suite's `AMQP_URL` names.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::proxy::Proxy;
use common::*;
use rabbit_backoff::prelude::*;
use rabbit_backoff::testing::{Release, TestBroker};
use rabbit_backoff::transport::{AmqpTransport, Transport};
use rabbit_backoff::{
    DeclareMode, Error, Health, QueueType, RetryBackend, RunningRuntime, SpecError,
};

/// How many times a refused start is repeated: the start that returned
/// `Ok` for a refused consumer did so about once in ten.
const STARTS: usize = 100;

/// `retry = "delayed"` on quorum queues, on `queue`.
fn delayed(spec: &mut ConsumerSpec, queue: &str) {
    spec.queue = queue.to_owned();
    spec.queue_type = Some(QueueType::Quorum);
    spec.retry = RetryBackend::Delayed;
}

/// Starts the test consumer, configured by `configure`, on `transport`.
async fn start_on(
    transport: Arc<dyn Transport>,
    configure: impl FnOnce(&mut ConsumerSpec),
) -> Result<RunningRuntime, Error> {
    Runtime::builder()
        .transport(transport)
        .state(Journal::default())
        .handle_signals(false)
        .consumer_with(process_job, configure)
        .start()
        .await
}

/// Every start of a consumer the broker refuses, or whose passive topology
/// is missing, returns that error from `start()`, never `Ok` with the
/// error left for `stop()`. On several threads, as a service runs: the
/// start-up waits on one while the runtime ends on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_fails_returns_its_error_every_time() {
    let older: Arc<dyn Transport> = Arc::new(AmqpTransport::new(url_before_4_3()));
    let in_memory: Arc<dyn Transport> = Arc::new(TestBroker::emulating(Release::V3_10));
    for (transport, on) in [
        (older, "a broker before 4.3"),
        (in_memory, "the in-memory 3.10"),
    ] {
        let queue = unique("start-refused");
        for start in 0..STARTS {
            let started = start_on(Arc::clone(&transport), |s| delayed(s, &queue)).await;
            let error = match started {
                Err(
                    error @ Error::InvalidSpec {
                        source: SpecError::DelayedUnsupported { .. },
                        ..
                    },
                ) => error,
                other => panic!("start {start} on {on}: {:?}", other.map(|_| "started")),
            };
            // Told by the release the node named, not by a refused probe.
            assert!(
                error.to_string().contains("this broker is RabbitMQ 3."),
                "{error}"
            );
        }
    }
    // Any start-up error: a passive topology that does not exist.
    let here: Arc<dyn Transport> = Arc::new(AmqpTransport::new(url()));
    let queue = unique("start-passive");
    for start in 0..STARTS {
        let started = start_on(Arc::clone(&here), |s| {
            s.queue = queue.clone();
            s.declare = DeclareMode::Passive;
        })
        .await;
        assert!(
            started.is_err(),
            "start {start}: a passive consumer started without its topology"
        );
    }
}

/// A consumer refused on a broker before 4.3 (`"delayed"` and
/// `"scheduled"`) declares nothing: no queue or exchange whose name starts
/// with its queue's exists after the refusal, the dead-letter index's
/// streams included. Listed through the management API on RabbitMQ, and by
/// the in-memory broker itself.
#[tokio::test]
async fn a_refused_consumer_declares_nothing() {
    let in_memory = TestBroker::emulating(Release::V3_10);
    for backend in [RetryBackend::Delayed, RetryBackend::Scheduled] {
        let configure = |queue: &str| {
            let queue = queue.to_owned();
            move |s: &mut ConsumerSpec| {
                delayed(s, &queue);
                s.retry = backend;
            }
        };
        let queue = unique("refused-declares");
        let listed = |names: Vec<String>| mine(names, &queue);
        let before = listed(management_objects(&management_url_before_4_3()).await);
        let transport: Arc<dyn Transport> = Arc::new(AmqpTransport::new(url_before_4_3()));
        let started = start_on(transport, configure(&queue)).await;
        assert!(started.is_err(), "{backend:?} started before 4.3");
        let after = listed(management_objects(&management_url_before_4_3()).await);
        assert_eq!(before, Vec::<String>::new());
        assert_eq!(after, before, "{backend:?}: declared on RabbitMQ");

        let queue = unique("refused-declares");
        let transport: Arc<dyn Transport> = Arc::new(in_memory.clone());
        let started = start_on(transport, configure(&queue)).await;
        assert!(
            started.is_err(),
            "{backend:?} started on the in-memory 3.10"
        );
        let objects = in_memory
            .queue_names()
            .into_iter()
            .chain(in_memory.exchange_names())
            .collect();
        assert_eq!(
            mine(objects, &queue),
            Vec::<String>::new(),
            "{backend:?}: declared in memory"
        );
    }
}

/// The names among `names` that belong to the consumer of `queue`.
fn mine(names: Vec<String>, queue: &str) -> Vec<String> {
    let mut mine: Vec<String> = names
        .into_iter()
        .filter(|name| name.starts_with(queue))
        .collect();
    mine.sort();
    mine
}

/// A `"delayed"` consumer on the address list of a 4.3 node (behind a
/// proxy) and a 3.10 node. It consumes on 4.3; the 4.3 node stops (the
/// proxy closes); the consumer fails over to 3.10, which cannot hold its
/// retries: it does not end, but says so in its health and waits. When the
/// 4.3 node is back it consumes there again, retries included.
#[tokio::test]
async fn a_node_that_cannot_hold_retries_is_waited_out() {
    let proxy = Proxy::start(&url_4_3()).await;
    let port: u16 = proxy
        .url()
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next()?.parse().ok())
        .expect("the proxy's port");
    let queue = unique("wait-for-node");
    let journal = Journal::default();
    let runtime = Runtime::builder()
        .uris([proxy.url().to_owned(), url_before_4_3()])
        .state(journal.clone())
        .handle_signals(false)
        .reconnect_backoff(Duration::from_millis(100), Duration::from_secs(1))
        .consumer_with(process_job, |s| delayed(s, &queue))
        .build()
        .expect("a valid runtime");
    let spec = runtime.specs().next().cloned().expect("one consumer");
    let _cleanup = Cleanup::of(&spec).at(&url_4_3());
    let health = runtime.health();
    let running = runtime.start().await.expect("starts on 4.3");
    assert!(
        health
            .node()
            .is_some_and(|node| node.contains(&port.to_string())),
        "on the 4.3 node: {:?}",
        health.node()
    );

    // The 4.3 node stops: the consumer waits, naming why.
    drop(proxy);
    let mut watch = health.clone();
    let waiting = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Health::WaitingForNode(why) = watch.current() {
                return why;
            }
            assert!(watch.changed().await.is_some(), "the runtime ended");
        }
    })
    .await
    .expect("the runtime says it waits for a node that can hold retries");
    assert!(
        waiting.contains(&queue) && waiting.contains("4.3"),
        "{waiting}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        matches!(
            health.current(),
            Health::WaitingForNode(_) | Health::Recovering
        ),
        "still waiting, not ended: {:?}",
        health.current()
    );

    // The 4.3 node is back: consuming there again, with held retries.
    let proxy = Proxy::start_at(&url_4_3(), port).await;
    tokio::time::timeout(Duration::from_secs(20), health.wait_ready())
        .await
        .expect("ready again within 20 s")
        .expect("ready");
    let publisher = Publisher::connect(proxy.url()).await.expect("a publisher");
    publisher
        .publish_to(&spec, &Job::new(7, Fail::Transient, Some(1)))
        .await
        .expect("published");
    eventually(
        "retried once, then handled",
        Duration::from_secs(20),
        || journal.reached(7, 1),
    )
    .await;
    publisher.close().await;
    running.stop().await.expect("stops cleanly");
}
