//! `retry = "scheduled"` (`RetryBackend::Scheduled`): on RabbitMQ 4.3 the
//! consumer consumes over AMQP 1.0 and settles a transient failure as
//! `modified` with `x-opt-delivery-time`, and the quorum work queue holds
//! the message back exactly that long, with the retry count, the error and
//! the first failure as annotations: no retry queue, no retry exchange, no
//! copy. A dead letter is a confirmed copy with the article's headers. On
//! 3.10 and 4.0 the consumer refuses to start, having declared nothing.

mod common;
#[path = "common/counters.rs"]
mod counters;

use std::time::Duration;

use common::*;
use common::{Verdict, proxy};
use counters::{counter, snapshotter};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel};
use rabbit_backoff::prelude::*;
use rabbit_backoff::{Error, QueueType, RetryBackend, SpecError};

/// The schedule: exponential, as tiers could not give it without a queue
/// per delay.
const DELAYS: &str = "exponential(300ms, x3, 3)";
const DELAYS_MS: [u64; 3] = [300, 900, 2700];
/// How late a held-back retry may come on a busy machine.
const LATE: Duration = Duration::from_millis(1500);
const WAIT: Duration = Duration::from_secs(30);

fn scheduled(spec: &mut ConsumerSpec, queue: &str) {
    spec.queue = queue.to_owned();
    spec.queue_type = Some(QueueType::Quorum);
    spec.retry = RetryBackend::Scheduled;
    spec.delays = DELAYS.parse().expect("a schedule");
}

async fn publish(channel: &Channel, queue: &str, job: &Job) {
    let mut headers = FieldTable::default();
    headers.insert(
        "tenant".into(),
        AMQPValue::LongString("acme".as_bytes().into()),
    );
    common::publish(
        channel,
        "",
        queue,
        &serde_json::to_vec(job).expect("a job"),
        BasicProperties::default()
            .with_message_id(format!("job-{}", job.id).into())
            .with_content_type("application/json".into())
            .with_headers(headers),
    )
    .await;
}

/// Waits until the queue exists and has a consumer.
async fn eventually_consuming(
    connection: &lapin::Connection,
    queue: &str,
    health: &rabbit_backoff::HealthWatch,
) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        // A channel per look: a passive declare of a missing queue closes it.
        let channel = connection.create_channel().await.expect("a channel");
        let declared = declare::try_passive(&channel, queue).await;
        if declared.is_ok_and(|q| q.consumer_count() > 0) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{queue} has no consumer within {WAIT:?}; the runtime: {:?}",
            health.current()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A scheduled consumer of a new queue, consuming, with a confirm channel
/// to publish to it.
struct Consumer {
    queue: String,
    spec: ConsumerSpec,
    journal: Journal,
    health: rabbit_backoff::HealthWatch,
    shutdown: rabbit_backoff::ShutdownHandle,
    task: tokio::task::JoinHandle<Result<(), Error>>,
    connection: lapin::Connection,
    channel: Channel,
    _cleanup: Cleanup,
}

impl Consumer {
    /// Starts one through `uri` (with an inbox on `store`, when given),
    /// `configure` applied after [`scheduled`], and waits until it
    /// consumes. `None` on a broker before 4.3, after asserting that it
    /// refused to start.
    async fn start(
        name: &str,
        uri: &str,
        store: Option<rabbit_backoff::dedupe::MemoryStore>,
        configure: impl FnOnce(&mut ConsumerSpec),
    ) -> Option<Consumer> {
        let queue = unique(name);
        let journal = Journal::default();
        let mut builder = Runtime::builder()
            .uri(uri)
            .state(journal.clone())
            .handle_signals(false)
            .shutdown_grace(Duration::from_secs(5));
        if let Some(store) = store {
            builder = builder.dedupe_store(store);
        }
        let runtime = builder
            .consumer_with(process_job, |s| {
                scheduled(s, &queue);
                configure(s);
            })
            .build()
            .expect("a valid runtime");
        let spec = runtime.specs().next().cloned().expect("one consumer");
        let cleanup = Cleanup::of(&spec);
        if broker_version() < (4, 3) {
            let refused = tokio::time::timeout(WAIT, runtime.run()).await;
            assert!(
                matches!(
                    refused,
                    Ok(Err(Error::InvalidSpec {
                        source: SpecError::ScheduledUnsupported { .. },
                        ..
                    }))
                ),
                "{refused:?}"
            );
            return None;
        }
        let (connection, channel) = channel().await;
        channel
            .confirm_select(lapin::options::ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        let shutdown = runtime.shutdown_handle();
        let health = runtime.health();
        let task = tokio::spawn(runtime.run());
        eventually_consuming(&connection, &queue, &health).await;
        Some(Consumer {
            queue,
            spec,
            journal,
            health,
            shutdown,
            task,
            connection,
            channel,
            _cleanup: cleanup,
        })
    }

    /// Stops it, which ends without error.
    async fn stop(self) {
        self.shutdown.shutdown();
        tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("stops")
            .expect("no panic")
            .expect("ends without error");
        let _ = self.connection.close(200, "".into()).await;
    }
}

/// Connections killed twice under load (both the AMQP 0-9-1 and the AMQP
/// 1.0 connection, through a proxy, as when a network link breaks): every
/// job that succeeds is handled, every one that fails for good is
/// dead-lettered, none is lost; a retry held back when the connection died
/// is delivered again (at once: its settlement never reached the broker,
/// or at its time: it did). On a broker before 4.3 the consumer refuses to
/// start, as above.
#[tokio::test]
async fn killed_connections_lose_nothing_with_scheduled_retries() {
    const N: u64 = 300;
    let proxy = proxy::Proxy::start(&url()).await;
    let Some(c) = Consumer::start("scheduled-killed", proxy.url(), None, |s| {
        s.delays = "100ms,200ms".parse().expect("a schedule");
    })
    .await
    else {
        return;
    };
    let (journal, health, channel, queue) = (&c.journal, &c.health, &c.channel, &c.queue);
    // A fifth fail once, a tenth twice, 1 in 50 for good.
    let job = |id: u64| match id % 50 {
        0 => Job::new(id, Fail::Permanent, None),
        1..=10 => Job::new(id, Fail::Transient, Some(1)),
        11..=15 => Job::new(id, Fail::Transient, Some(2)),
        _ => Job::new(id, Fail::None, None),
    };
    // A third of the load before each kill, the rest after the second;
    // each kill while retries are held back and deliveries are in flight.
    for (round, ids) in [(1, 0..N / 3), (2, N / 3..2 * N / 3), (3, 2 * N / 3..N)] {
        eventually(&format!("connected for round {round}"), WAIT, || {
            health.reconnects() + 1 >= round && health.is_ready()
        })
        .await;
        let before = journal.calls().len();
        for id in ids {
            publish(channel, queue, &job(id)).await;
        }
        if round < 3 {
            eventually(&format!("handling before kill {round}"), WAIT, || {
                journal.calls().len() >= before + 20
            })
            .await;
            proxy.kill();
        }
    }
    let handled = |id: u64| {
        let job = job(id);
        journal
            .calls_for(id)
            .iter()
            .any(|seen| job.verdict(seen.retry_count) == Verdict::Ok)
    };
    let succeeding: Vec<u64> = (0..N)
        .filter(|&id| job(id).verdict(u32::MAX) == Verdict::Ok)
        .collect();
    eventually(
        "every succeeding job handled",
        Duration::from_secs(60),
        || succeeding.iter().all(|&id| handled(id)),
    )
    .await;
    let dead_expected = N as usize - succeeding.len();
    let dlq = c.spec.names().dead_letter_queue;
    let mut dead = Vec::new();
    while dead.len() < dead_expected {
        let letter = next_message(channel, &dlq, WAIT).await;
        let job: Job = serde_json::from_slice(&letter.delivery.data).expect("a job");
        dead.push(job.id);
    }
    dead.sort_unstable();
    dead.dedup();
    let more = depth(channel, &dlq).await;
    eprintln!("dead letters beyond one per message: {more}");
    let permanent: Vec<u64> = (0..N).filter(|id| id % 50 == 0).collect();
    assert_eq!(
        dead, permanent,
        "every permanent failure dead-lettered, no other"
    );
    let calls = journal.calls().len();
    eprintln!(
        "scheduled retries, two connection kills: {} jobs, {calls} handler calls, all {} \
         successes handled, {} dead letters, lost 0, {} reconnects",
        N,
        succeeding.len(),
        dead.len(),
        health.reconnects()
    );
    assert!(health.reconnects() >= 2, "reconnected after each kill");
    c.stop().await;
}

/// `dedupe` keeps its guarantee with scheduled retries: a retry held back
/// by the broker comes back under the same message id and is handled (its
/// key was released when it was held back), while a second publish of a
/// handled message is dropped. On a broker before 4.3, refused as above.
#[tokio::test]
async fn dedupe_drops_duplicates_and_runs_held_back_retries() {
    // Before the consumer makes its counters.
    snapshotter();
    let store = rabbit_backoff::dedupe::MemoryStore::new();
    let Some(c) = Consumer::start("scheduled-dedupe", &url(), Some(store), |s| {
        s.delays = "200ms".parse().expect("a schedule");
        s.dedupe = Some(rabbit_backoff::Dedupe::new(Duration::from_secs(3_600)));
    })
    .await
    else {
        return;
    };
    let (journal, channel, queue) = (&c.journal, &c.channel, &c.queue);
    // Fails once, then succeeds on its held-back retry.
    let job = Job::new(7, Fail::Transient, Some(1));
    publish(channel, queue, &job).await;
    eventually("job 7 handled on its retry", WAIT, || journal.reached(7, 1)).await;
    // The same message again: a duplicate of a completed key.
    publish(channel, queue, &job).await;
    let skipped = || counter("rabbit_backoff_duplicates_skipped_total", queue);
    eventually("the duplicate dropped", WAIT, || skipped() >= 1).await;
    let counts: Vec<u32> = journal.calls_for(7).iter().map(|s| s.retry_count).collect();
    assert_eq!(counts, [0, 1], "the retry ran, the duplicate did not");
    // Counted as with tiers.
    assert_eq!(counter("rabbit_backoff_messages_retried_total", queue), 1);
    assert_eq!(counter("rabbit_backoff_messages_handled_total", queue), 1);
    c.stop().await;
}

/// Publishes `job` over AMQP 1.0 with `annotations` (message annotations)
/// and `properties` (application properties), as another AMQP 1.0 client
/// would.
async fn publish_amqp1(
    queue: &str,
    job: &Job,
    annotations: fe2o3_amqp::types::messaging::annotations::Annotations,
    properties: fe2o3_amqp::types::primitives::OrderedMap<
        String,
        fe2o3_amqp::types::primitives::SimpleValue,
    >,
) {
    use fe2o3_amqp::types::messaging::{
        ApplicationProperties, Data, Message, MessageAnnotations, Outcome,
    };
    let address = rabbit_backoff_test_support::amqp1::address(&url());
    let mut connection = fe2o3_amqp::Connection::open("rbt-hostile", address.as_str())
        .await
        .expect("an AMQP 1.0 connection");
    let mut session = fe2o3_amqp::Session::begin(&mut connection)
        .await
        .expect("a session");
    let address = format!("/queues/{queue}");
    let mut sender = fe2o3_amqp::Sender::attach(&mut session, "rbt-hostile", address.as_str())
        .await
        .expect("a sender");
    let message = Message::builder()
        .message_annotations(MessageAnnotations(annotations))
        .application_properties(ApplicationProperties(properties))
        .data(Data(serde_json::to_vec(job).expect("a job").into()))
        .build();
    let outcome = sender.send(message).await.expect("sent");
    assert!(matches!(outcome, Outcome::Accepted(_)), "{outcome:?}");
    sender.close().await.ok();
    session.end().await.ok();
    connection.close().await.ok();
}

/// No message stops a scheduled consumer, however its annotations and
/// application properties are built: annotations nested 100 deep, one of
/// 64 KiB, 40 annotation keys (beside the 4 the consumer sets), application
/// properties of 64 KiB. Each such message that fails once comes back on
/// its held-back retry and is handled; a normal message after them is
/// handled too.
#[tokio::test]
async fn hostile_annotations_stop_no_scheduled_consumer() {
    use fe2o3_amqp::types::messaging::annotations::{Annotations, OwnedKey};
    use fe2o3_amqp::types::primitives::{OrderedMap, SimpleValue, Symbol, Value};
    let Some(c) = Consumer::start("scheduled-hostile", &url(), None, |s| {
        s.delays = "100ms".parse().expect("a schedule");
    })
    .await
    else {
        return;
    };
    let (journal, queue) = (&c.journal, c.queue.as_str());

    let key = |k: &str| OwnedKey::Symbol(Symbol::from(k));
    let mut deep = Value::String("bottom".into());
    for _ in 0..100 {
        let mut map = OrderedMap::new();
        map.insert(Value::String("k".into()), deep);
        deep = Value::Map(map);
    }
    let cases: Vec<(&str, Annotations, OrderedMap<String, SimpleValue>)> = vec![
        (
            "nested 100 deep",
            OrderedMap::from_iter([(key("x-opt-deep"), deep)]),
            OrderedMap::new(),
        ),
        (
            "a 64 KiB annotation",
            OrderedMap::from_iter([(key("x-opt-big"), Value::String("a".repeat(64 * 1024)))]),
            OrderedMap::new(),
        ),
        (
            "40 annotation keys",
            (0..40)
                .map(|i| (key(&format!("x-opt-k{i}")), Value::Uint(i)))
                .collect(),
            OrderedMap::new(),
        ),
        (
            "64 KiB of application properties",
            OrderedMap::new(),
            (0..64)
                .map(|i| (format!("p{i}"), SimpleValue::String("b".repeat(1024))))
                .collect(),
        ),
    ];
    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    for (id, (_, annotations, properties)) in cases.into_iter().enumerate() {
        let job = Job::new(id as u64, Fail::Transient, Some(1));
        publish_amqp1(queue, &job, annotations, properties).await;
    }
    for (id, name) in names.iter().enumerate() {
        eventually(&format!("{name}: handled on its retry"), WAIT, || {
            journal.reached(id as u64, 1)
        })
        .await;
    }
    let normal = names.len() as u64;
    publish_amqp1(
        queue,
        &Job::new(normal, Fail::None, None),
        OrderedMap::new(),
        OrderedMap::new(),
    )
    .await;
    eventually("a normal message after them", WAIT, || {
        journal.reached(normal, 0)
    })
    .await;
    assert_eq!(c.health.reconnects(), 0, "no message broke a connection");
    c.stop().await;
}

/// A dead letter of a scheduled consumer is the framework's usual copy, so
/// the operator tools read and replay it as any other: `dlq groups` counts
/// it with its error, and a replay hands it to the consumer again with a
/// retry count of 0, which dead-letters it again with its history.
#[tokio::test]
async fn dlq_groups_and_replays_a_scheduled_dead_letter() {
    use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, ReplayOptions};
    let Some(c) = Consumer::start("scheduled-replay", &url(), None, |s| {
        s.delays = "100ms".parse().expect("a schedule");
    })
    .await
    else {
        return;
    };
    publish(&c.channel, &c.queue, &Job::new(5, Fail::Permanent, None)).await;
    let dlq_name = c.spec.names().dead_letter_queue;
    eventually_async("the dead letter", WAIT, || async {
        depth(&c.channel, &dlq_name).await == 1
    })
    .await;
    let dlq = Dlq::connect(&url(), &c.spec)
        .await
        .expect("the tools connect");
    let groups = dlq
        .groups(&DeadLetterFilter::default())
        .await
        .expect("groups");
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].count, 1);
    assert_eq!(groups[0].reason, "permanent");
    assert!(
        groups[0]
            .example_error
            .as_deref()
            .is_some_and(|e| e.contains("job 5 is invalid")),
        "{:?}",
        groups[0]
    );
    let report = dlq
        .replay(&DeadLetterFilter::default(), &ReplayOptions::default())
        .await
        .expect("replayed");
    assert_eq!(report.matched.len(), 1, "{report:?}");
    assert!(report.skipped.is_empty(), "{report:?}");
    eventually("handled again", WAIT, || c.journal.calls_for(5).len() == 2).await;
    let again = next_message(&c.channel, &dlq_name, WAIT).await;
    let props = &again.delivery.properties;
    assert_eq!(header_int(props, "x-retry-count"), Some(0));
    assert!(
        props
            .headers()
            .as_ref()
            .is_some_and(|h| h.inner().contains_key("x-replay-history")),
        "the replay is in its history"
    );
    dlq.close().await;
    c.stop().await;
}

/// The shared case: the same consumer, the same messages and the same
/// assertions on RabbitMQ 4.3 and on the in-memory broker emulating 4.3
/// (`TestBroker::emulating(Release::V4_3)`, on tokio's paused clock), so
/// that the twin is held to what the real broker does. Before 4.3, the real
/// broker and the in-memory one emulating 3.10 both refuse the consumer,
/// having declared nothing.
mod shared {
    use std::sync::Arc;

    use rabbit_backoff::lapin::BasicProperties;
    use rabbit_backoff::lapin::types::{AMQPValue, FieldTable};
    use rabbit_backoff::testing::{Release, TestBroker};
    use rabbit_backoff::transport::{AmqpTransport, Transport};

    use super::common::seam::{OnBroker, assert_not_declared};
    use super::*;

    /// Job `id`'s properties: its message id, its content type and a
    /// header of the application's, which every hop must keep.
    fn job_properties(id: u64) -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert("tenant".into(), AMQPValue::LongString("acme".into()));
        BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(format!("job-{id}").into())
            .with_content_type("application/json".into())
            .with_headers(headers)
    }

    /// What a scheduled consumer on `transport` does with a message that
    /// always fails (1), one that fails permanently (2) and one that fails
    /// once (3): each retry held back exactly as long as the schedule says,
    /// with the previous hop's error; the message's own properties on every
    /// call; dead letters with the article's headers and none of the hop's
    /// annotations; no retry queue or retry exchange.
    async fn holds_retries_back(transport: Arc<dyn Transport>, shared: bool) {
        let journal = Journal::default();
        let queue = unique("scheduled-shared");
        let builder = Runtime::builder()
            .state(journal.clone())
            .consumer_with(process_job, |s| scheduled(s, &queue));
        let on = OnBroker::start(transport, shared, builder).await;
        on.publish_json(&Job::new(1, Fail::Transient, None), job_properties(1))
            .await;
        on.publish_json(&Job::new(2, Fail::Permanent, None), job_properties(2))
            .await;
        on.publish_json(&Job::new(3, Fail::Transient, Some(1)), job_properties(3))
            .await;

        let [exhausted, permanent] = &on.dead_jobs([1, 2]).await;
        assert_dead_letter(exhausted, "exhausted", 3, "dependency unavailable (job 1)");
        assert!(
            header_str(exhausted, "x-first-failed-at").is_some_and(|at| at.ends_with('Z')),
            "the first failure, carried on every hop"
        );
        assert_eq!(header_str(exhausted, "tenant").as_deref(), Some("acme"));
        assert_eq!(
            exhausted.message_id().as_ref().map(|id| id.as_str()),
            Some("job-1")
        );
        for annotation in ["x-opt-error", "x-opt-retry-count", "x-opt-delivery-time"] {
            assert!(
                header(exhausted, annotation).is_none(),
                "{annotation} left on the dead letter"
            );
        }
        assert_dead_letter(permanent, "permanent", 0, "job 2 is invalid");

        let names = on.spec.names();
        let calls = journal.calls_for(1);
        assert_eq!(
            calls.iter().map(|s| s.retry_count).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        for (hop, pair) in calls.windows(2).enumerate() {
            let (waited, asked) = (
                pair[1].at - pair[0].at,
                Duration::from_millis(DELAYS_MS[hop]),
            );
            eprintln!(
                "retry {}: asked {asked:?}, came back after {waited:?}",
                hop + 1
            );
            assert!(
                waited >= asked && waited <= asked + LATE,
                "retry {}: back after {waited:?}, asked {asked:?}",
                hop + 1
            );
            assert_eq!(
                pair[1].held_error.as_deref(),
                Some("dependency unavailable (job 1)"),
                "the error rides on every hop"
            );
        }
        for seen in &calls {
            assert_eq!(seen.tenant.as_deref(), Some("acme"));
            assert_eq!(seen.message_id.as_deref(), Some("job-1"));
            assert_eq!(seen.content_type.as_deref(), Some("application/json"));
            // As RabbitMQ 4.3 names the route of a quorum queue's delivery
            // over AMQP 1.0, so does its in-memory emulation.
            assert_eq!(
                (
                    seen.route_headers.0.as_deref(),
                    seen.route_headers.1.as_deref()
                ),
                (
                    Some(names.exchange.as_str()),
                    Some(names.routing_key.as_str())
                ),
                "x-exchange and x-routing-key on retry {}",
                seen.retry_count
            );
        }
        assert_eq!(
            calls.iter().map(|s| s.acquired_count).collect::<Vec<_>>(),
            [None, Some(1), Some(2), Some(3)],
            "x-acquired-count on each retry, as an integer of any width"
        );
        eventually("job 3 handled on its retry", WAIT, || journal.reached(3, 1)).await;
        for ms in DELAYS_MS {
            assert_eq!(
                on.try_depth(&names.retry_queue(ms)).await,
                None,
                "no {ms} ms tier"
            );
        }
        assert!(
            !on.exchange_exists(&names.retry_exchange).await,
            "no retry exchange is declared"
        );
        on.stop().await;
    }

    /// The consumer refuses to start on `transport`, naming the queue and
    /// what to write instead, having declared nothing.
    async fn refuses(transport: Arc<dyn Transport>) {
        let queue = unique("scheduled-shared");
        let runtime = Runtime::builder()
            .transport(Arc::clone(&transport))
            .state(Journal::default())
            .handle_signals(false)
            .consumer_with(process_job, |s| scheduled(s, &queue))
            .build()
            .expect("a valid runtime");
        let error = tokio::time::timeout(WAIT, runtime.run())
            .await
            .expect("refused at once")
            .expect_err("refused");
        let message = error.to_string();
        assert!(
            matches!(
                &error,
                Error::InvalidSpec {
                    queue: refused,
                    source: SpecError::ScheduledUnsupported { .. },
                } if refused == &queue
            ),
            "{message}"
        );
        assert!(
            message.contains("4.3") && message.contains("retry = \"tiers\""),
            "{message}"
        );
        assert_not_declared(&*transport, &queue).await;
    }

    #[tokio::test]
    async fn rabbitmq() {
        let transport = Arc::new(AmqpTransport::new(url()));
        if broker_version() < (4, 3) {
            refuses(transport).await;
        } else {
            holds_retries_back(transport, true).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn in_memory() {
        holds_retries_back(Arc::new(TestBroker::emulating(Release::V4_3)), false).await;
    }

    #[tokio::test(start_paused = true)]
    async fn in_memory_emulating_3_10_refuses() {
        refuses(Arc::new(TestBroker::new())).await;
    }
}

/// An error that asks for its own wait, for the test below.
#[derive(Debug, thiserror::Error, Classify)]
enum PacedError {
    #[error("dependency unavailable")]
    Unavailable,
    #[error("rate limited")]
    RateLimited {
        #[retry_after]
        wait: Duration,
    },
}

/// When each call of a message began, on tokio's clock, by message id.
#[derive(Default, Clone)]
struct CallTimes(std::sync::Arc<std::sync::Mutex<Vec<(u64, tokio::time::Instant)>>>);

impl CallTimes {
    fn of(&self, id: u64) -> Vec<tokio::time::Instant> {
        let calls = self.0.lock().unwrap();
        calls
            .iter()
            .filter(|(i, _)| *i == id)
            .map(|(_, at)| *at)
            .collect()
    }
}

/// Job `id` fails `attempts` times: with `RateLimited(wait_ms)` when that
/// is set, else as unavailable; then succeeds.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Paced {
    id: u64,
    attempts: u32,
    wait_ms: Option<u64>,
}

#[backoff_consumer(queue = "placeholder", delays = "1s,2s,4s")]
async fn paced(job: Paced, ctx: &Context, calls: State<CallTimes>) -> Result<(), PacedError> {
    calls
        .0
        .lock()
        .unwrap()
        .push((job.id, tokio::time::Instant::now()));
    if ctx.retry_count() >= job.attempts {
        return Ok(());
    }
    match job.wait_ms {
        Some(ms) => Err(PacedError::RateLimited {
            wait: Duration::from_millis(ms),
        }),
        None => Err(PacedError::Unavailable),
    }
}

/// With jitter, every held retry counts in
/// `rabbit_backoff_messages_retried_total` under its tier (jitter picks
/// another wait nearly every time), and a `RetryAfter` under
/// `delay="retry_after"`; a `RetryAfter` is held at least as long as the
/// error asked, never jittered shorter. In memory, emulating 4.3, on
/// tokio's paused clock.
#[tokio::test(start_paused = true)]
async fn every_held_retry_is_counted_and_retry_after_is_never_early() {
    use rabbit_backoff::testing::{Release, TestBroker};
    snapshotter();
    let broker = TestBroker::emulating(Release::V4_3);
    let queue = unique("scheduled-paced");
    let calls = CallTimes::default();
    let running = Runtime::builder()
        .transport(broker.clone())
        .state(calls.clone())
        .handle_signals(false)
        .consumer_with(paced, |s| {
            s.queue = queue.clone();
            s.queue_type = Some(QueueType::Quorum);
            s.retry = RetryBackend::Scheduled;
            s.jitter = Some("20%".parse().expect("a jitter"));
        })
        .start()
        .await
        .expect("starts on the in-memory 4.3");
    // Twenty messages retried twice each, jittered.
    for id in 0..20 {
        let job = Paced {
            id,
            attempts: 2,
            wait_ms: None,
        };
        broker.publish_json(&queue, &queue, &job).await;
    }
    // Ten rate-limited twice each, asking 10 s each time.
    for id in 90..100 {
        let limited = Paced {
            id,
            attempts: 2,
            wait_ms: Some(10_000),
        };
        broker.publish_json(&queue, &queue, &limited).await;
    }
    broker.run_until_idle().await;
    for id in 0..20 {
        assert_eq!(
            calls.of(id).len(),
            3,
            "job {id} handled on its second retry"
        );
    }
    for id in 90..100 {
        let times = calls.of(id);
        assert_eq!(times.len(), 3, "job {id} handled on its second retry");
        for pair in times.windows(2) {
            let waited = pair[1] - pair[0];
            assert!(
                waited >= Duration::from_millis(10_000),
                "job {id} held {waited:?}, asked 10 s"
            );
        }
    }
    assert_eq!(
        counter("rabbit_backoff_messages_retried_total", &queue),
        60,
        "40 jittered retries and 20 rate-limited ones"
    );
    running.stop().await.expect("stops");
}
