//! Helpers shared by the integration tests: a real broker, unique names, a
//! cleanup that runs even when a test fails, and a scriptable test consumer.
#![allow(dead_code)]

/// One `#[tokio::test]` per case on each broker of a shared suite: a
/// module `rabbitmq` (the real broker at `AMQP_URL`) and a module
/// `in_memory` (the in-memory broker, on tokio's paused clock), each case
/// an `async fn(Backend)` of the suite, which defines `Backend::rabbitmq()`
/// and `Backend::in_memory()`.
#[allow(unused_macros)]
macro_rules! on_every_broker {
    ($($case:ident),* $(,)?) => {
        /// Against the real RabbitMQ at `AMQP_URL`.
        mod rabbitmq {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(super::Backend::rabbitmq()).await
                }
            )*
        }

        /// Against the in-memory broker, on tokio's paused clock.
        mod in_memory {
            $(
                #[tokio::test(start_paused = true)]
                async fn $case() {
                    super::$case(super::Backend::in_memory()).await
                }
            )*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_every_broker;

pub mod proxy;
pub mod seam;
pub mod stores;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lapin::options::BasicGetOptions;
use lapin::{Channel, Connection};
use rabbit_backoff::ShutdownHandle;
use rabbit_backoff::prelude::*;
use serde::{Deserialize, Serialize};

pub use rabbit_backoff_test_support::broker::{connect, unique, url};
pub use rabbit_backoff_test_support::cleanup::Cleanup;
pub use rabbit_backoff_test_support::declare;
#[allow(unused_imports)]
pub use rabbit_backoff_test_support::publish::publish;

pub async fn channel() -> (Connection, Channel) {
    let connection = connect().await;
    let channel = connection.create_channel().await.expect("open a channel");
    (connection, channel)
}

/// The test broker's port on 127.0.0.1 (from `AMQP_URL`; 5672 when it names none).
pub fn broker_port() -> u16 {
    let url = url();
    let rest = url.split_once('@').map_or(url.as_str(), |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    authority
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or(5672)
}

/// The test broker's `rabbitmqctl`: the command in `RABBITMQCTL` (a program
/// and the arguments it starts with, as `scripts/broker.sh env VERSION`
/// prints for a node in a root of its own), or the installed `rabbitmqctl`.
pub fn rabbitmqctl() -> std::process::Command {
    let line = std::env::var("RABBITMQCTL").unwrap_or_else(|_| "rabbitmqctl".to_owned());
    let mut words = line.split_whitespace();
    let mut command = std::process::Command::new(words.next().unwrap_or("rabbitmqctl"));
    command.args(words);
    command
}

/// Runs the test broker's `rabbitmqctl` with `args`, as an operator would;
/// fails the test with its error output when it fails.
pub fn run_rabbitmqctl(args: &[&str]) {
    let output = rabbitmqctl().args(args).output().expect("rabbitmqctl runs");
    assert!(
        output.status.success(),
        "rabbitmqctl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The test broker's RabbitMQ version as (major, minor), asked of its
/// `rabbitmqctl` once.
pub fn broker_version() -> (u32, u32) {
    static VERSION: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let output = rabbitmqctl()
            .args(["-q", "status", "--formatter", "json"])
            .output()
            .expect("rabbitmqctl runs");
        assert!(
            output.status.success(),
            "rabbitmqctl status failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let status: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("rabbitmqctl status prints JSON");
        let version = status["rabbitmq_version"]
            .as_str()
            .expect("the status names the version");
        let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    })
}

/// A RabbitMQ 4.3 node, whatever broker `AMQP_URL` names:
/// `RABBIT_BACKOFF_URL_4_3`, or the one `scripts/broker.sh up 4.3` starts.
pub fn url_4_3() -> String {
    std::env::var("RABBIT_BACKOFF_URL_4_3")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5643/%2f".to_owned())
}

/// A RabbitMQ node before 4.3, whatever broker `AMQP_URL` names:
/// `RABBIT_BACKOFF_URL_3_10`, or the machine's RabbitMQ 3.10.
pub fn url_before_4_3() -> String {
    std::env::var("RABBIT_BACKOFF_URL_3_10")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// The management API of [`url_before_4_3`]'s node:
/// `RABBIT_BACKOFF_MANAGEMENT_URL_3_10`, or the machine's.
pub fn management_url_before_4_3() -> String {
    std::env::var("RABBIT_BACKOFF_MANAGEMENT_URL_3_10")
        .unwrap_or_else(|_| "http://127.0.0.1:15672".to_owned())
}

/// The names of every queue and exchange of the default virtual host, as
/// the management API at `management` (guest/guest) lists them.
pub async fn management_objects(management: &str) -> Vec<String> {
    let management = management.trim_end_matches('/').to_owned();
    tokio::task::spawn_blocking(move || {
        let mut names = Vec::new();
        for kind in ["queues", "exchanges"] {
            let listed: Vec<serde_json::Value> =
                ureq::get(&format!("{management}/api/{kind}/%2f?columns=name"))
                    .header("Authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")
                    .call()
                    .unwrap_or_else(|e| panic!("listing the {kind} at {management}: {e}"))
                    .body_mut()
                    .read_json()
                    .expect("the management API answers JSON");
            names.extend(
                listed
                    .iter()
                    .filter_map(|object| object["name"].as_str().map(str::to_owned)),
            );
        }
        names
    })
    .await
    .expect("listed")
}

/// Polls `queue` with basic.get (auto-ack) until a message arrives.
pub async fn next_message(
    channel: &Channel,
    queue: &str,
    timeout: Duration,
) -> lapin::message::BasicGetMessage {
    let deadline = Instant::now() + timeout;
    loop {
        let got = channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap_or_else(|e| panic!("basic.get on {queue}: {e}"));
        if let Some(message) = got {
            return message;
        }
        assert!(
            Instant::now() < deadline,
            "no message arrived in {queue} within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The number of ready messages in `queue`.
pub async fn depth(channel: &Channel, queue: &str) -> u32 {
    declare::passive(channel, queue).await.message_count()
}

/// Waits until `condition` holds, or fails the test.
pub async fn eventually(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until an asynchronous `condition` holds, or fails the test.
pub async fn eventually_async<F: std::future::Future<Output = bool>>(
    what: &str,
    timeout: Duration,
    mut condition: impl FnMut() -> F,
) {
    let deadline = Instant::now() + timeout;
    while !condition().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn header<'a>(
    props: &'a lapin::BasicProperties,
    name: &str,
) -> Option<&'a lapin::types::AMQPValue> {
    props.headers().as_ref()?.inner().get(name)
}

pub fn header_str(props: &lapin::BasicProperties, name: &str) -> Option<String> {
    match header(props, name)? {
        lapin::types::AMQPValue::LongString(s) => {
            Some(String::from_utf8_lossy(s.as_bytes()).into_owned())
        }
        lapin::types::AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

pub fn header_int(props: &lapin::BasicProperties, name: &str) -> Option<i64> {
    use lapin::types::AMQPValue::*;
    Some(match header(props, name)? {
        ShortShortInt(v) => (*v).into(),
        ShortInt(v) => (*v).into(),
        LongInt(v) => (*v).into(),
        LongLongInt(v) => *v,
        ShortShortUInt(v) => (*v).into(),
        ShortUInt(v) => (*v).into(),
        LongUInt(v) => (*v).into(),
        _ => return None,
    })
}

/// Asserts that a consumer with `retry = "scheduled"` did not start, refused
/// for a broker that would not hold its retries back (before RabbitMQ 4.3).
#[allow(dead_code)]
pub fn assert_scheduled_refused<T>(started: Result<T, rabbit_backoff::Error>) {
    let Err(error) = started else {
        panic!("a scheduled consumer started on a broker before RabbitMQ 4.3");
    };
    assert!(
        matches!(
            error,
            rabbit_backoff::Error::InvalidSpec {
                source: rabbit_backoff::SpecError::ScheduledUnsupported { .. },
                ..
            }
        ),
        "{error}"
    );
}

/// Asserts the article's headers on a dead letter: its reason, its
/// `x-retry-count`, its `x-error` and an `x-failed-at` in UTC.
#[allow(dead_code)]
pub fn assert_dead_letter(props: &lapin::BasicProperties, reason: &str, retries: i64, error: &str) {
    assert_eq!(
        header_str(props, "x-dead-letter-reason").as_deref(),
        Some(reason)
    );
    assert_eq!(
        header_int(props, "x-retry-count"),
        Some(retries),
        "{reason}"
    );
    assert_eq!(
        header_str(props, "x-error").as_deref(),
        Some(error),
        "{reason}"
    );
    assert!(
        header_str(props, "x-failed-at").is_some_and(|at| at.ends_with('Z')),
        "{reason}: x-failed-at"
    );
}

/// The properties of dead letter `id` in a run of two groups, as the tests
/// of long dead-letter queues publish them: message id `m-{id}`,
/// persistent, an `x-error` of `order {id} not found` (even ids) or
/// `timeout after {id} ms` (odd ones), and the headers `extra`.
pub fn one_of_two_groups(
    id: u64,
    extra: &[(&str, lapin::types::AMQPValue)],
) -> lapin::BasicProperties {
    let error = if id.is_multiple_of(2) {
        format!("order {id} not found")
    } else {
        format!("timeout after {id} ms")
    };
    let mut headers = declare::arguments(extra);
    headers.insert(
        "x-error".into(),
        lapin::types::AMQPValue::LongString(error.into_bytes().into()),
    );
    lapin::BasicProperties::default()
        .with_message_id(format!("m-{id}").into())
        .with_delivery_mode(2)
        .with_headers(headers)
}

// ---- the scriptable test consumer ----

/// What a job asks its handler to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fail {
    None,
    Transient,
    Permanent,
    Panic,
    /// Takes ten seconds: longer than any test's handler timeout.
    Hang,
}

/// The payload of the test consumer: fail in the given way while the retry
/// count is below `attempts` (always, when absent).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub id: u64,
    pub fail: Fail,
    pub attempts: Option<u32>,
}

/// What a handler of a job concludes at one retry count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Transient,
    Permanent,
}

impl Job {
    pub fn new(id: u64, fail: Fail, attempts: Option<u32>) -> Self {
        Job { id, fail, attempts }
    }

    /// The verdict at `retry_count` of a job that neither panics nor hangs,
    /// as `process_job` reaches it.
    pub fn verdict(&self, retry_count: u32) -> Verdict {
        let failing = self.attempts.is_none_or(|n| retry_count < n);
        match self.fail {
            Fail::None => Verdict::Ok,
            _ if !failing => Verdict::Ok,
            Fail::Permanent => Verdict::Permanent,
            _ => Verdict::Transient,
        }
    }
}

#[derive(Debug, thiserror::Error, Classify)]
pub enum JobError {
    #[error("dependency unavailable (job {0})")]
    Unavailable(u64),
    #[permanent]
    #[error("job {0} is invalid")]
    Invalid(u64),
}

/// One call of the handler, as it saw the message.
#[derive(Debug, Clone)]
pub struct Seen {
    pub id: u64,
    pub retry_count: u32,
    pub message_id: Option<String>,
    pub correlation_id: Option<String>,
    pub content_type: Option<String>,
    pub tenant: Option<String>,
    /// The exchange and routing key the delivery came through.
    pub exchange: String,
    pub routing_key: String,
    /// The queue that last dead-lettered the message to its work queue: the
    /// retry queue it waited in (`x-death`'s newest entry).
    pub came_from: Option<String>,
    /// The error of the last failure, as a retry held back by the broker
    /// carries it (`retry = "scheduled"`: the annotation `x-opt-error`).
    pub held_error: Option<String>,
    /// The route RabbitMQ 4.3 names in headers on a quorum queue's delivery
    /// over AMQP 1.0 (`x-exchange`, `x-routing-key`), and how often the
    /// delivery was acquired before (`x-acquired-count`), read with
    /// `Context::header_int` whatever the integer's width.
    pub route_headers: (Option<String>, Option<String>),
    pub acquired_count: Option<i64>,
    /// When the handler ran, on tokio's clock (virtual under paused time).
    pub at: tokio::time::Instant,
}

impl Seen {
    /// The call of a handler for job `id`, as it saw the delivery.
    pub fn of(id: u64, ctx: &Context) -> Seen {
        Seen {
            id,
            retry_count: ctx.retry_count(),
            message_id: ctx.message_id().map(str::to_owned),
            correlation_id: ctx.correlation_id().map(str::to_owned),
            content_type: ctx
                .properties()
                .content_type()
                .as_ref()
                .map(|s| s.to_string()),
            tenant: ctx.header_str("tenant").map(str::to_owned),
            came_from: last_death_queue(ctx),
            exchange: ctx.exchange().to_owned(),
            routing_key: ctx.routing_key().to_owned(),
            held_error: ctx.header_str("x-opt-error").map(str::to_owned),
            route_headers: (
                ctx.header_str("x-exchange").map(str::to_owned),
                ctx.header_str("x-routing-key").map(str::to_owned),
            ),
            acquired_count: ctx.header_int("x-acquired-count"),
            at: tokio::time::Instant::now(),
        }
    }
}

/// Every call of the handler, shared with the test.
#[derive(Default, Clone)]
pub struct Journal(pub Arc<Mutex<Vec<Seen>>>);

impl Journal {
    pub fn calls(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
    pub fn calls_for(&self, id: u64) -> Vec<Seen> {
        self.calls().into_iter().filter(|s| s.id == id).collect()
    }
    /// The retry counts job `id` was handled with, in order.
    pub fn retry_counts(&self, id: u64) -> Vec<u32> {
        self.calls_for(id).iter().map(|s| s.retry_count).collect()
    }
    /// Whether job `id` was handled with at least this retry count.
    pub fn reached(&self, id: u64, retry_count: u32) -> bool {
        self.calls_for(id)
            .iter()
            .any(|s| s.retry_count >= retry_count)
    }
}

/// The `queue` of the newest `x-death` entry.
pub fn last_death_queue(ctx: &Context) -> Option<String> {
    use lapin::types::AMQPValue;
    let Some(AMQPValue::FieldArray(deaths)) = ctx.headers()?.inner().get("x-death") else {
        return None;
    };
    let Some(AMQPValue::FieldTable(newest)) = deaths.as_slice().first() else {
        return None;
    };
    match newest.inner().get("queue")? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

#[backoff_consumer(queue = "placeholder", delays = "100ms,200ms,300ms")]
pub async fn process_job(job: Job, ctx: &Context, journal: State<Journal>) -> Result<(), JobError> {
    journal.0.lock().unwrap().push(Seen::of(job.id, ctx));
    let failing = job.attempts.is_none_or(|n| ctx.retry_count() < n);
    match job.fail {
        Fail::None => Ok(()),
        _ if !failing => Ok(()),
        Fail::Transient => Err(JobError::Unavailable(job.id)),
        Fail::Permanent => Err(JobError::Invalid(job.id)),
        Fail::Panic => panic!("job {} panicked on purpose", job.id),
        Fail::Hang => {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(())
        }
    }
}

/// A running runtime with the test consumer on a unique queue.
pub struct Running {
    pub spec: ConsumerSpec,
    pub health: rabbit_backoff::HealthWatch,
    pub journal: Journal,
    pub shutdown: ShutdownHandle,
    pub task: tokio::task::JoinHandle<Result<(), rabbit_backoff::Error>>,
    pub cleanup: Cleanup,
}

impl Running {
    pub async fn start(name: &str, configure: impl FnOnce(&mut ConsumerSpec)) -> Running {
        // Fails the test at once, saying why, when no broker answers (the
        // runtime itself would keep retrying).
        let (connection, channel) = channel().await;
        let queue = unique(name);
        let journal = Journal::default();
        let runtime = test_runtime(journal.clone())
            .shutdown_grace(Duration::from_secs(5))
            .consumer_with(process_job, |spec| {
                spec.queue = queue.clone();
                configure(spec);
            })
            .build()
            .expect("a valid runtime");
        let spec = runtime.specs().next().cloned().expect("one consumer");
        let cleanup = Cleanup::of(&spec);
        let shutdown = runtime.shutdown_handle();
        let health = runtime.health();
        let task = tokio::spawn(runtime.run());
        // Wait until the topology exists, so that publishes are routed.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let probe = connection.create_channel().await.expect("channel");
            let declared = declare::try_passive(&probe, &spec.queue).await;
            if declared.is_ok_and(|q| q.consumer_count() > 0) {
                break;
            }
            assert!(!task.is_finished(), "the runtime stopped during start-up");
            assert!(
                Instant::now() < deadline,
                "the consumer of {} did not start within 10 s",
                spec.queue
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(channel);
        // Bounded: a close lapin never sees confirmed must not hold the test.
        let _ =
            tokio::time::timeout(Duration::from_secs(5), connection.close(200, "".into())).await;
        Running {
            spec,
            health,
            journal,
            shutdown,
            task,
            cleanup,
        }
    }

    pub async fn publish(&self, publisher: &Publisher, job: &Job) -> String {
        publisher
            .publish_to(&self.spec, job)
            .await
            .expect("publish a job")
    }

    pub async fn stop(self) -> Cleanup {
        self.shutdown.shutdown();
        let result = tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("the runtime stops within 15 s")
            .expect("the runtime task does not panic");
        result.expect("the runtime ends without error");
        self.cleanup
    }
}

/// A runtime on the test broker with `state`, that leaves signals to the
/// test: how every test's runtime starts out, before its consumers.
pub fn test_runtime<T: std::any::Any + Send + Sync>(state: T) -> rabbit_backoff::RuntimeBuilder {
    Runtime::builder()
        .uri(url())
        .state(state)
        .handle_signals(false)
}

pub async fn publisher() -> Publisher {
    Publisher::connect(&url())
        .await
        .expect("a publisher connects")
}

/// A connection of the framework's own (for `declare_topology`, `status`, …).
pub async fn framework_connection() -> std::sync::Arc<dyn rabbit_backoff::transport::Connection> {
    rabbit_backoff::connect(&url())
        .await
        .expect("the framework connects")
}
