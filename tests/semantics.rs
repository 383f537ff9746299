//! The per-message semantics, written once and run against every broker the
//! framework can talk to: `cargo test --test semantics rabbitmq` runs them
//! against the real RabbitMQ, `cargo test --test semantics in_memory` against
//! the in-memory broker of `rabbit_backoff::testing` on paused time. Each case
//! drives the broker only through the transport seam, so the same code
//! exercises both; a difference is a bug in the in-memory broker.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::proxy::Proxy;
use common::seam::OnBroker;
use common::*;
use rabbit_backoff::lapin::BasicProperties;
use rabbit_backoff::lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::Topology;
use rabbit_backoff::transport::{AmqpTransport, Transport};
use rabbit_backoff::{Consumer, ConsumerSpec, Error, Jitter, QueueType, RetryBackend, SpecError};
use serde::{Deserialize, Serialize};

const WAIT: Duration = Duration::from_secs(30);

/// A broker to run the cases against.
struct Backend {
    transport: Arc<dyn Transport>,
    /// Whether what a case declares must be deleted afterwards (a shared,
    /// real broker).
    shared: bool,
    /// The in-memory broker, to kill its connections.
    memory: Option<rabbit_backoff::testing::TestBroker>,
}

/// Kills the connections of a [`Backend::killable`] transport.
enum Killer {
    Proxy(Proxy),
    Memory(rabbit_backoff::testing::TestBroker),
}

impl Killer {
    /// Kills every connection made so far, as a dead node or a broken link
    /// does; new ones can be made.
    fn kill(&self) {
        match self {
            Killer::Proxy(proxy) => proxy.kill(),
            Killer::Memory(broker) => broker.close_connections(),
        }
    }
}

impl Backend {
    fn rabbitmq() -> Self {
        Backend {
            transport: Arc::new(AmqpTransport::new(url())),
            shared: true,
            memory: None,
        }
    }

    fn in_memory() -> Self {
        Backend::in_memory_emulating(rabbit_backoff::testing::Release::V3_10)
    }

    fn in_memory_emulating(release: rabbit_backoff::testing::Release) -> Self {
        let broker = rabbit_backoff::testing::TestBroker::emulating(release);
        Backend {
            transport: Arc::new(broker.clone()),
            shared: false,
            memory: Some(broker),
        }
    }

    /// The same broker through a transport whose connections the killer
    /// kills (on RabbitMQ, through a proxy of the test's own).
    async fn killable(&self) -> (Backend, Killer) {
        match &self.memory {
            Some(broker) => (
                Backend::in_memory_of(broker),
                Killer::Memory(broker.clone()),
            ),
            None => {
                let proxy = Proxy::start(&url()).await;
                let backend = Backend {
                    transport: Arc::new(AmqpTransport::new(proxy.url())),
                    shared: true,
                    memory: None,
                };
                (backend, Killer::Proxy(proxy))
            }
        }
    }

    /// Whether the broker applies RabbitMQ 4.3's delayed retries: the real
    /// one from 4.3 on, the in-memory one when it emulates 4.3.
    fn applies_delayed_retries(&self) -> bool {
        match &self.memory {
            Some(broker) => broker.release() == rabbit_backoff::testing::Release::V4_3,
            None => broker_version() >= (4, 3),
        }
    }

    fn in_memory_of(broker: &rabbit_backoff::testing::TestBroker) -> Self {
        Backend {
            transport: Arc::new(broker.clone()),
            shared: false,
            memory: Some(broker.clone()),
        }
    }
}

/// The test consumer on a unique queue, on a broker.
struct Harness {
    on: OnBroker,
    journal: Journal,
}

impl std::ops::Deref for Harness {
    type Target = OnBroker;
    fn deref(&self) -> &OnBroker {
        &self.on
    }
}

impl std::ops::DerefMut for Harness {
    fn deref_mut(&mut self) -> &mut OnBroker {
        &mut self.on
    }
}

impl Harness {
    async fn start(
        backend: &Backend,
        name: &str,
        configure: impl FnOnce(&mut ConsumerSpec),
    ) -> Self {
        Self::start_with(backend, name, process_job, configure).await
    }

    /// The paced consumer instead of the scriptable one.
    async fn paced(
        backend: &Backend,
        name: &str,
        configure: impl FnOnce(&mut ConsumerSpec),
    ) -> Self {
        Self::start_with(backend, name, paced, configure).await
    }

    async fn start_with<C: Consumer>(
        backend: &Backend,
        name: &str,
        consumer: C,
        configure: impl FnOnce(&mut ConsumerSpec),
    ) -> Self {
        let queue = unique(name);
        let journal = Journal::default();
        let builder = Runtime::builder()
            .state(journal.clone())
            .consumer_with(consumer, |spec| {
                spec.queue = queue.clone();
                configure(spec);
            });
        let on = OnBroker::start(Arc::clone(&backend.transport), backend.shared, builder).await;
        Harness { on, journal }
    }

    /// Publishes a job to the consumer's work exchange, confirmed.
    async fn publish<T: Serialize>(&self, job: &T, properties: BasicProperties) {
        self.on.publish_json(job, properties).await;
    }

    /// How many times step `id` was handled.
    fn handled(&self, id: u64) -> usize {
        self.journal.calls_for(id).len()
    }

    async fn stop(self) {
        self.on.stop().await;
    }
}

fn props() -> BasicProperties {
    BasicProperties::default().with_delivery_mode(2)
}

fn with_header(name: &str, value: AMQPValue) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(name.into(), value);
    props().with_headers(headers)
}

async fn success_is_acked_once(backend: Backend) {
    let mut h = Harness::start(&backend, "sem-success", |_| {}).await;
    h.publish(&Job::new(1, Fail::None, None), props()).await;
    eventually("the job", WAIT, || !h.journal.calls_for(1).is_empty()).await;
    // Stopping returns anything unacked to the queue: nothing is there.
    h.stop_consumer().await;
    assert_eq!(h.depth(&h.spec.queue).await, 0, "acked");
    assert_eq!(h.depth(&h.spec.names().dead_letter_queue).await, 0);
    assert_eq!(h.journal.calls_for(1).len(), 1, "handled exactly once");
    h.stop().await;
}

async fn each_tier_in_turn_then_success(backend: Backend) {
    let h = Harness::start(&backend, "sem-tiers", |_| {}).await;
    h.publish(&Job::new(1, Fail::Transient, Some(3)), props())
        .await;
    eventually("attempt 4", WAIT, || h.journal.reached(1, 3)).await;
    let calls = h.journal.calls_for(1);
    let counts: Vec<u32> = calls.iter().map(|s| s.retry_count).collect();
    assert_eq!(counts, [0, 1, 2, 3]);
    for (gap, delay) in calls.windows(2).zip([100u64, 200, 300]) {
        let waited = gap[1].at.duration_since(gap[0].at);
        assert!(
            waited >= Duration::from_millis(delay),
            "tier {delay}ms waited {waited:?}"
        );
    }
    h.stop().await;
}

async fn exhausted_messages_carry_their_story(backend: Backend) {
    let h = Harness::start(&backend, "sem-exhausted", |_| {}).await;
    h.publish(&Job::new(7, Fail::Transient, None), props())
        .await;
    let dead = h.next_dead_letter().await;
    let p = &dead.properties;
    assert_eq!(header_int(p, "x-retry-count"), Some(3));
    assert_eq!(
        header_str(p, "x-dead-letter-reason").as_deref(),
        Some("exhausted")
    );
    assert_eq!(
        header_str(p, "x-error").as_deref(),
        Some("dependency unavailable (job 7)")
    );
    assert_eq!(
        header_str(p, "x-original-queue").as_deref(),
        Some(h.spec.queue.as_str())
    );
    let failed_at = header_str(p, "x-failed-at").expect("x-failed-at");
    assert!(failed_at.ends_with('Z'), "{failed_at}");
    assert_eq!(h.journal.calls_for(7).len(), 4);
    h.stop().await;
}

async fn permanent_failures_skip_the_tiers(backend: Backend) {
    let h = Harness::start(&backend, "sem-permanent", |_| {}).await;
    h.publish(&Job::new(3, Fail::Permanent, None), props())
        .await;
    let dead = h.next_dead_letter().await;
    assert_eq!(
        header_str(&dead.properties, "x-dead-letter-reason").as_deref(),
        Some("permanent")
    );
    // No retry tier: a count of 0, written (the article's contract).
    assert_eq!(header_int(&dead.properties, "x-retry-count"), Some(0));
    assert_eq!(h.journal.calls_for(3).len(), 1);
    h.stop().await;
}

/// A dead letter names where it came from, leaving out what its
/// `x-original-queue` already says: through the work exchange (named after
/// the queue) with the queue's name as routing key, neither
/// `x-original-exchange` nor `x-original-routing-key`; through the default
/// exchange, `x-original-exchange` of `""`. Neither went through a retry
/// tier: an `x-retry-count` of 0, written all the same (the article's
/// contract; only the framework's own headers leave out what they imply).
async fn dead_letters_name_their_origin_where_the_queue_does_not(backend: Backend) {
    let h = Harness::start(&backend, "sem-origin", |_| {}).await;
    let queue = h.spec.queue.clone();
    h.publish(&Job::new(1, Fail::Permanent, None), props())
        .await;
    let body = serde_json::to_vec(&Job::new(2, Fail::Permanent, None)).unwrap();
    h.on.publish_via("", &queue, &body, props()).await;
    let mut dead = BTreeMap::new();
    for _ in 0..2 {
        let d = h.next_dead_letter().await;
        let job: Job = serde_json::from_slice(&d.data).unwrap();
        dead.insert(job.id, d.properties);
    }
    let origin = |p: &BasicProperties| {
        (
            header_str(p, "x-original-queue"),
            header(p, "x-original-exchange").map(|_| header_str(p, "x-original-exchange")),
            header(p, "x-original-routing-key").is_some(),
        )
    };
    assert_eq!(origin(&dead[&1]), (Some(queue.clone()), None, false));
    assert_eq!(
        origin(&dead[&2]),
        (Some(queue.clone()), Some(Some(String::new())), false)
    );
    for p in dead.values() {
        assert_eq!(header_int(p, "x-retry-count"), Some(0));
    }
    h.stop().await;
}

async fn undecodable_bodies_are_dead_lettered(backend: Backend) {
    let h = Harness::start(&backend, "sem-decode", |_| {}).await;
    h.publish_raw(b"not json", props()).await;
    let dead = h.next_dead_letter().await;
    assert_eq!(
        header_str(&dead.properties, "x-dead-letter-reason").as_deref(),
        Some("decode")
    );
    assert_eq!(dead.data, b"not json");
    assert!(h.journal.calls().is_empty());
    h.stop().await;
}

async fn odd_retry_counts_are_read_tolerantly(backend: Backend) {
    let h = Harness::start(&backend, "sem-counts", |_| {}).await;
    let cases = [
        (1, AMQPValue::LongString("2".into()), 2),
        (2, AMQPValue::ShortShortUInt(1), 1),
        (3, AMQPValue::Double(1.5), 0),
        (4, AMQPValue::LongLongInt(-3), 0),
    ];
    for (id, value, _) in &cases {
        h.publish(
            &Job::new(*id, Fail::None, None),
            with_header("x-retry-count", value.clone()),
        )
        .await;
    }
    eventually("every job", WAIT, || {
        (1..=4).all(|id| !h.journal.calls_for(id).is_empty())
    })
    .await;
    for (id, _, expected) in cases {
        assert_eq!(h.journal.calls_for(id)[0].retry_count, expected, "job {id}");
    }
    h.stop().await;
}

/// The retry count is the framework's own `x-retry-count`, never read from
/// `x-death`: RabbitMQ 4.x no longer interprets `x-death` when a client
/// republishes a message, and a forged or copied one must not change how
/// many tiers a message gets.
async fn the_retry_count_ignores_x_death(backend: Backend) {
    let h = Harness::start(&backend, "sem-xdeath", |_| {}).await;
    let tier = Topology::of(&h.spec).retry_queues[0].name.clone();
    let mut death = FieldTable::default();
    death.insert("count".into(), AMQPValue::LongLongInt(7));
    death.insert("reason".into(), AMQPValue::LongString("expired".into()));
    death.insert("queue".into(), AMQPValue::LongString(tier.as_str().into()));
    death.insert("exchange".into(), AMQPValue::LongString("".into()));
    let forged = AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into());
    // No x-retry-count beside it: the first attempt.
    h.publish(
        &Job::new(1, Fail::Transient, Some(1)),
        with_header("x-death", forged.clone()),
    )
    .await;
    // An x-retry-count beside it: that count, whatever x-death says.
    let mut both = FieldTable::default();
    both.insert("x-death".into(), forged);
    both.insert("x-retry-count".into(), AMQPValue::LongLongInt(2));
    h.publish(
        &Job::new(2, Fail::Transient, Some(3)),
        props().with_headers(both),
    )
    .await;
    eventually("both retried to success", WAIT, || {
        h.journal.reached(1, 1) && h.journal.reached(2, 3)
    })
    .await;
    let counts = |id| -> Vec<u32> {
        h.journal
            .calls_for(id)
            .iter()
            .map(|s| s.retry_count)
            .collect()
    };
    assert_eq!(
        counts(1),
        [0, 1],
        "x-death's count of 7 is not a retry count"
    );
    assert_eq!(counts(2), [2, 3]);
    assert_eq!(h.depth(&h.spec.names().dead_letter_queue).await, 0);
    h.stop().await;
}

async fn identity_and_headers_survive_every_hop(backend: Backend) {
    let h = Harness::start(&backend, "sem-identity", |_| {}).await;
    let properties = with_header("tenant", AMQPValue::LongString("acme".into()))
        .with_message_id("m-1".into())
        .with_correlation_id("c-1".into())
        .with_content_type("application/json".into())
        .with_priority(3);
    h.publish(&Job::new(1, Fail::Transient, None), properties)
        .await;
    let dead = h.next_dead_letter().await;
    for seen in h.journal.calls_for(1) {
        assert_eq!(seen.message_id.as_deref(), Some("m-1"));
        assert_eq!(seen.correlation_id.as_deref(), Some("c-1"));
        assert_eq!(seen.tenant.as_deref(), Some("acme"));
    }
    let p = &dead.properties;
    assert_eq!(p.message_id().as_ref().map(|s| s.as_str()), Some("m-1"));
    assert_eq!(p.priority(), &Some(3));
    assert_eq!(p.delivery_mode(), &Some(2));
    assert_eq!(header_str(p, "tenant").as_deref(), Some("acme"));
    h.stop().await;
}

async fn a_topology_conflict_names_the_queue_and_argument(backend: Backend) {
    let queue = unique("sem-conflict");
    let mut spec = process_job.spec();
    spec.queue = queue.clone();
    let cleanup = backend.shared.then(|| Cleanup::of(&spec));
    // The retry queue exists with another TTL.
    let mut topology = Topology::of(&spec);
    topology.retry_queues[0]
        .arguments
        .retain(|(name, _)| name != "x-message-ttl");
    topology.retry_queues[0].arguments.push((
        "x-message-ttl".into(),
        rabbit_backoff::topology::Argument::Int(999),
    ));
    let connection = backend.transport.connect().await.expect("connect");
    rabbit_backoff::topology::declare_topology(&*connection, &topology)
        .await
        .expect("the other topology");
    let started = Runtime::builder()
        .transport(Arc::clone(&backend.transport))
        .state(Journal::default())
        .handle_signals(false)
        .consumer_with(process_job, |s| s.queue = queue.clone())
        .start()
        .await;
    match started {
        Err(Error::TopologyConflict {
            object,
            name,
            argument,
            ..
        }) => {
            assert_eq!(object, "queue");
            assert_eq!(name, format!("{queue}.retry_100ms"));
            assert_eq!(argument.as_deref(), Some("x-message-ttl"));
        }
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("started despite the conflict"),
    }
    connection.close().await;
    drop(cleanup);
}

async fn a_panicking_handler_is_retried_and_the_consumer_keeps_running(backend: Backend) {
    let h = Harness::start(&backend, "sem-panic", |_| {}).await;
    h.publish(&Job::new(5, Fail::Panic, Some(1)), props()).await;
    eventually("the retry after the panic", WAIT, || {
        h.journal.calls_for(5).len() == 2
    })
    .await;
    h.publish(&Job::new(6, Fail::None, None), props()).await;
    eventually("a later job", WAIT, || h.journal.calls_for(6).len() == 1).await;
    h.stop().await;
}

async fn a_hung_handler_times_out_and_is_retried(backend: Backend) {
    let mut h = Harness::start(&backend, "sem-timeout", |spec| {
        spec.handler_timeout = Some(Duration::from_millis(300));
    })
    .await;
    h.publish(&Job::new(11, Fail::Hang, Some(1)), props()).await;
    eventually("the retry after the timeout", WAIT, || {
        h.journal.calls_for(11).len() == 2
    })
    .await;
    let calls = h.journal.calls_for(11);
    let waited = calls[1].at - calls[0].at;
    assert!(
        waited >= Duration::from_millis(300 + 100) && waited < Duration::from_secs(5),
        "abandoned after 300 ms, then the first tier's delay; not after the handler's 10 s: {waited:?}"
    );
    h.stop_consumer().await;
    assert_eq!(h.depth(&h.spec.names().dead_letter_queue).await, 0);
    assert_eq!(h.depth(&h.spec.queue).await, 0, "settled");
    h.stop().await;
}

async fn many_messages_with_mixed_outcomes_are_all_accounted_for(backend: Backend) {
    let h = Harness::start(&backend, "sem-mixed", |spec| spec.prefetch = 20).await;
    let fails = [
        Fail::None,
        Fail::Transient,
        Fail::Permanent,
        Fail::None,
        Fail::Panic,
    ];
    for id in 0..100u64 {
        let fail = fails[id as usize % fails.len()];
        h.publish(&Job::new(id, fail, Some(1)), props()).await;
    }
    // None (40) once, Transient and Panic (40) twice, Permanent (20) once.
    eventually("every message handled", WAIT, || {
        h.journal.calls().len() == 40 + 80 + 20
    })
    .await;
    let mut dead = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let message = h.next_dead_letter().await;
        let job: Job = serde_json::from_slice(&message.data).unwrap();
        assert_eq!(job.fail, Fail::Permanent);
        dead.insert(job.id);
    }
    assert_eq!(dead.len(), 20);
    assert_eq!(h.depth(&h.spec.names().dead_letter_queue).await, 0);
    h.stop().await;
}

/// Declares `topology` as an operator would, for a consumer with
/// `declare = "passive"`.
async fn declare_as_operator(backend: &Backend, topology: &Topology) {
    let connection = backend.transport.connect().await.expect("connect");
    rabbit_backoff::topology::declare_topology(&*connection, topology)
        .await
        .expect("the operator's topology");
    connection.close().await;
}

/// A copy the broker does not take (`how` breaks the first retry tier) is
/// never acked: the original is requeued, after a pause, and nothing is lost.
async fn a_copy_the_broker_does_not_take_keeps_the_original(
    backend: Backend,
    name: &str,
    how: impl FnOnce(&mut Topology),
) {
    let queue = unique(name);
    let mut spec = process_job.spec();
    spec.queue = queue.clone();
    // A classic retry queue refuses the copy at once (`how`); a quorum one
    // applies a length limit only after the fact.
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    let mut topology = Topology::of(&spec);
    how(&mut topology);
    let _cleanup = backend.shared.then(|| Cleanup::of(&spec));
    declare_as_operator(&backend, &topology).await;
    let mut h = Harness::start(&backend, name, |s| {
        s.queue = queue.clone();
        s.queue_type = Some(rabbit_backoff::QueueType::Classic);
        s.declare = rabbit_backoff::DeclareMode::Passive;
    })
    .await;
    h.publish(&Job::new(1, Fail::Transient, None), props())
        .await;
    eventually("a second attempt after the requeue", WAIT, || {
        h.journal.calls_for(1).len() >= 2
    })
    .await;
    h.stop_consumer().await;
    let calls = h.journal.calls_for(1);
    assert!(
        calls.iter().all(|s| s.retry_count == 0),
        "never moved on: {:?}",
        calls.len()
    );
    assert!(
        calls[1].at - calls[0].at >= Duration::from_secs(1),
        "requeued after a pause, not in a hot loop"
    );
    // A delivery still unacked when the channel closed is requeued by the
    // queue after the close, not before the close's answer.
    eventually_async("the original back in its queue", WAIT, || async {
        h.depth(&queue).await == 1
    })
    .await;
    assert_eq!(h.depth(&topology.retry_queues[0].name).await, 0);
    assert_eq!(h.depth(&topology.dead_letter_queue.name).await, 0);
    h.stop().await;
}

async fn a_nacked_retry_copy_keeps_the_original(backend: Backend) {
    a_copy_the_broker_does_not_take_keeps_the_original(backend, "sem-nacked", |t| {
        use rabbit_backoff::topology::Argument;
        let args = &mut t.retry_queues[0].arguments;
        args.push(("x-max-length".into(), Argument::Int(0)));
        args.push(("x-overflow".into(), Argument::Str("reject-publish".into())));
    })
    .await
}

async fn an_unroutable_retry_copy_keeps_the_original(backend: Backend) {
    a_copy_the_broker_does_not_take_keeps_the_original(backend, "sem-unroutable", |t| {
        let first = t.retry_queues[0].name.clone();
        t.bindings.retain(|b| b.queue != first);
    })
    .await
}

async fn retries_return_only_to_their_own_queue_on_a_fanout_exchange(backend: Backend) {
    let exchange = unique("sem-fanout");
    let mut consumers = Vec::new();
    for side in ["a", "b"] {
        let exchange = exchange.clone();
        consumers.push(
            Harness::start(&backend, &format!("sem-fanout-{side}"), move |s| {
                s.names.exchange = Some(exchange);
                s.exchange_kind = rabbit_backoff::ExchangeKind::Fanout;
            })
            .await,
        );
    }
    let _cleanup = backend
        .shared
        .then(|| Cleanup::default().exchange(&exchange));
    // Fails once in each queue, then succeeds on its retry.
    consumers[0]
        .publish(&Job::new(1, Fail::Transient, Some(1)), props())
        .await;
    for h in &consumers {
        eventually("the retry", WAIT, || h.journal.reached(1, 1)).await;
    }
    for mut h in consumers {
        h.stop_consumer().await;
        let counts: Vec<u32> = h
            .journal
            .calls_for(1)
            .iter()
            .map(|s| s.retry_count)
            .collect();
        assert_eq!(counts, [0, 1], "{}: its own retry only", h.spec.queue);
        h.stop().await;
    }
}

async fn exponential_jittered_tiers_are_declared_and_used(backend: Backend) {
    let h = Harness::start(&backend, "sem-jitter", |s| {
        s.delays = "exponential(100ms, x2, 3)".parse().unwrap();
        s.jitter = Some("20%".parse().unwrap());
    })
    .await;
    // 15 retry queues: five around each of 100, 200 and 400 ms.
    let names = h.spec.names();
    let delays = h.spec.retry_delays();
    assert_eq!(delays.len(), 15);
    for &ms in &delays {
        assert_eq!(h.depth(&names.retry_queue(ms)).await, 0, "{ms}ms declared");
    }
    for id in 0..40 {
        h.publish(&Job::new(id, Fail::Transient, Some(1)), props())
            .await;
    }
    eventually("every retry", WAIT, || {
        (0..40).all(|id| h.journal.reached(id, 1))
    })
    .await;
    let used: std::collections::BTreeSet<String> = h
        .journal
        .calls()
        .into_iter()
        .filter_map(|s| s.came_from)
        .collect();
    let first_tier: Vec<String> = Jitter::spread("20%".parse().unwrap(), 100)
        .into_iter()
        .map(|ms| names.retry_queue(ms))
        .collect();
    assert!(used.iter().all(|q| first_tier.contains(q)), "{used:?}");
    assert!(
        used.len() >= 3,
        "40 retries spread over several sub-queues: {used:?}"
    );
    h.stop().await;
}

/// Operating a dead-letter queue longer than the window a pass holds (1000
/// messages): a peek keeps the order, groups count both kinds, a replay of
/// one group moves exactly it and keeps the other's order; on a classic and
/// a quorum dead-letter queue.
async fn dead_letter_passes_past_their_window_keep_the_order(backend: Backend) {
    use rabbit_backoff::QueueType;
    use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, ReplayOptions};
    use rabbit_backoff::transport::Confirm;
    const N: u64 = 1500;
    for queue_type in [QueueType::Classic, QueueType::Quorum] {
        let mut spec = ConsumerSpec::new(unique("dlq-window"), "1s".parse().unwrap());
        spec.queue_type = Some(queue_type);
        let _cleanup = backend.shared.then(|| Cleanup::of(&spec));
        let connection = backend.transport.connect().await.unwrap();
        rabbit_backoff::topology::declare_topology(&*connection, &Topology::of(&spec))
            .await
            .unwrap();
        let channel = connection.open_channel().await.unwrap();
        let dead_letter_queue = spec.names().dead_letter_queue;
        for id in 0..N {
            let mut headers = FieldTable::default();
            let error = if id % 2 == 0 {
                format!("order {id} not found")
            } else {
                format!("timeout after {id} ms")
            };
            headers.insert(
                "x-error".into(),
                AMQPValue::LongString(error.into_bytes().into()),
            );
            let properties = BasicProperties::default()
                .with_message_id(format!("m-{id}").into())
                .with_delivery_mode(2)
                .with_headers(headers);
            let confirm = channel
                .publish(rabbit_backoff::transport::Publication::new(
                    "",
                    &dead_letter_queue,
                    b"{}",
                    properties,
                ))
                .await
                .unwrap();
            assert_eq!(confirm, Confirm::Ack);
        }
        let dlq = Dlq::with_transport(backend.transport.clone(), &spec)
            .await
            .unwrap();
        let ids = |report: &rabbit_backoff::dead_letters::DeadLetterReport| -> Vec<u64> {
            report
                .matched
                .iter()
                .map(|m| m.message_id.as_deref().unwrap()[2..].parse().unwrap())
                .collect()
        };
        let all = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
        assert_eq!(ids(&all), (0..N).collect::<Vec<_>>(), "{queue_type:?}");
        assert_eq!(all.kept, N as usize);
        let groups = dlq.groups(&DeadLetterFilter::default()).await.unwrap();
        assert_eq!(groups.len(), 2);
        let odd = groups
            .iter()
            .find(|g| g.fingerprint == "timeout after <n> ms")
            .unwrap();
        assert_eq!(odd.count, (N / 2) as usize);
        let replayed = dlq
            .replay(
                &DeadLetterFilter::default().group(odd.id.clone()),
                &ReplayOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(replayed.matched.len(), (N / 2) as usize);
        let rest = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
        assert_eq!(
            ids(&rest),
            (0..N).filter(|id| id % 2 == 0).collect::<Vec<_>>(),
            "{queue_type:?}"
        );
        let work = channel.check_queue(&spec.queue).await.unwrap();
        assert_eq!(
            work.messages,
            (N / 2) as u32,
            "the group is in the work queue"
        );
        let marker = format!("{dead_letter_queue}.pass");
        let probe = connection.open_channel().await.unwrap();
        assert!(
            probe.check_queue(&marker).await.is_err(),
            "a finished pass leaves no marker queue"
        );
        dlq.close().await;
        connection.close().await;
    }
}

/// A step of the paced consumer: it takes `millis`, then succeeds (or
/// fails transiently, for `Fail::Transient`).
#[derive(Debug, Serialize, Deserialize)]
struct Step {
    id: u64,
    millis: u64,
    fail: Fail,
}

impl Step {
    fn ok(id: u64, millis: u64) -> Self {
        Step {
            id,
            millis,
            fail: Fail::None,
        }
    }

    fn transient(id: u64) -> Self {
        Step {
            id,
            millis: 0,
            fail: Fail::Transient,
        }
    }
}

#[backoff_consumer(queue = "placeholder", delays = "100ms")]
async fn paced(step: Step, ctx: &Context, journal: State<Journal>) -> Result<(), JobError> {
    journal.0.lock().unwrap().push(Seen::of(step.id, ctx));
    tokio::time::sleep(Duration::from_millis(step.millis)).await;
    match step.fail {
        Fail::Transient => Err(JobError::Unavailable(step.id)),
        _ => Ok(()),
    }
}

/// Headers that nest more levels than a consumer accepts: it rejects the
/// delivery, and the broker dead-letters it as it is.
fn too_deep() -> BasicProperties {
    let mut table = FieldTable::default();
    for _ in 0..rabbit_backoff::rules::MAX_HEADER_DEPTH + 4 {
        let mut outer = FieldTable::default();
        outer.insert("a".into(), AMQPValue::FieldTable(table));
        table = outer;
    }
    props().with_headers(table)
}

/// Deliveries that finish in the reverse order of their tags are each
/// acknowledged once, and no acknowledgement covers one still being handled
/// (the broker would close the channel on a tag acknowledged twice).
async fn out_of_order_completions_are_acked_once_each(backend: Backend) {
    let mut h = Harness::paced(&backend, "sem-order", |s| s.prefetch = 10).await;
    let health = h.health();
    for id in 0..10u64 {
        h.publish(&Step::ok(id, (10 - id) * 40), props()).await;
    }
    eventually("every step", WAIT, || (0..10).all(|id| h.handled(id) > 0)).await;
    h.stop_consumer().await;
    assert_eq!(h.depth(&h.spec.queue).await, 0, "every step acked");
    for id in 0..10 {
        assert_eq!(h.handled(id), 1, "step {id} handled once");
    }
    assert_eq!(health.reconnects(), 0, "the channel never failed");
    h.stop().await;
}

/// A requeue (a retry copy the broker refuses) and a reject (headers nested
/// too deep) among deliveries that succeed: each goes out after the
/// acknowledgements of what finished before it, and no acknowledgement
/// covers it, so the requeued one is back in its queue and the rejected one
/// in the dead-letter queue, dead-lettered by the broker.
async fn a_requeue_and_a_reject_in_the_middle_of_a_run(backend: Backend) {
    use rabbit_backoff::topology::Argument;
    let queue = unique("sem-run");
    let mut spec = paced.spec();
    spec.queue = queue.clone();
    // A classic retry queue of length 0 refuses every copy at once; a quorum
    // one applies a length limit only after the fact.
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    let mut topology = Topology::of(&spec);
    let refusing = &mut topology.retry_queues[0].arguments;
    refusing.push(("x-max-length".into(), Argument::Int(0)));
    refusing.push(("x-overflow".into(), Argument::Str("reject-publish".into())));
    let _cleanup = backend.shared.then(|| Cleanup::of(&spec));
    declare_as_operator(&backend, &topology).await;
    let mut h = Harness::start_with(&backend, "sem-run", paced, |s| {
        s.queue = queue.clone();
        s.queue_type = Some(rabbit_backoff::QueueType::Classic);
        s.prefetch = 10;
        s.declare = rabbit_backoff::DeclareMode::Passive;
    })
    .await;
    let health = h.health();
    h.publish(&Step::ok(0, 50), props()).await;
    h.publish(&Step::transient(1), props()).await;
    h.publish(&Step::ok(2, 0), too_deep()).await;
    h.publish(&Step::ok(3, 50), props()).await;
    h.publish(&Step::ok(4, 50), props()).await;
    eventually("the run, and step 1 requeued", WAIT, || {
        [0, 3, 4].iter().all(|&id| h.handled(id) == 1) && h.handled(1) >= 2
    })
    .await;
    let rejected = h.next_dead_letter().await;
    h.stop_consumer().await;
    let step: Step = serde_json::from_slice(&rejected.data).unwrap();
    assert_eq!(step.id, 2);
    // Its headers, too deep for the framework, come set aside in one flat
    // header (as the frame guard hands them over): the broker's x-death is
    // among the entries, with the reason.
    let Some(AMQPValue::ByteArray(packed)) = header(
        &rejected.properties,
        rabbit_backoff::rules::headers::DEEP_HEADERS,
    ) else {
        panic!(
            "the deep headers set aside: {:?}",
            rejected.properties.headers()
        );
    };
    let entries = rabbit_backoff::rules::deep_headers::entries(packed.as_slice()).expect("packed");
    let death = entries
        .iter()
        .find(|e| e.name == "x-death")
        .expect("dead-lettered by the broker, with x-death");
    assert!(
        death.value.windows(8).any(|w| w == b"rejected"),
        "x-death says rejected"
    );
    assert_eq!(h.handled(2), 0, "never handled");
    for id in [0, 3, 4] {
        assert_eq!(h.handled(id), 1, "step {id} acked once");
    }
    assert!(h.journal.calls_for(1).iter().all(|s| s.retry_count == 0));
    eventually_async("step 1 back in its queue", WAIT, || async {
        h.depth(&queue).await == 1
    })
    .await;
    assert_eq!(h.depth(&topology.dead_letter_queue.name).await, 0);
    assert_eq!(health.reconnects(), 0, "the channel never failed");
    h.stop().await;
}

/// A shutdown while one delivery is being handled, some have finished and
/// more wait prefetched: what finished and the one in flight are
/// acknowledged, the prefetched ones return to the queue, nothing else.
async fn shutdown_in_the_middle_of_a_run_acks_exactly_what_finished(backend: Backend) {
    let mut h = Harness::paced(&backend, "sem-shutdown", |s| {
        s.prefetch = 10;
        s.concurrency = Some(1);
    })
    .await;
    for id in 0..10u64 {
        let millis = if id == 4 { 1_000 } else { 10 };
        h.publish(&Step::ok(id, millis), props()).await;
    }
    eventually("step 4 started", WAIT, || h.handled(4) == 1).await;
    h.stop_consumer().await;
    for id in 0..5 {
        assert_eq!(h.handled(id), 1, "step {id} handled once");
    }
    for id in 5..10 {
        assert_eq!(h.handled(id), 0, "step {id} never started");
    }
    assert_eq!(
        h.depth(&h.spec.queue).await,
        5,
        "the five that never started, and nothing that finished"
    );
    h.stop().await;
}

/// The connection dies while one delivery is being handled and the ones
/// after it have finished: those were acknowledged (each on its own, since
/// the one before them was still open), the open one was not and comes
/// back once the consumer has reconnected.
async fn a_killed_connection_redelivers_exactly_what_had_not_finished(backend: Backend) {
    let (through, killer) = backend.killable().await;
    let h = Harness::paced(&through, "sem-killed", |s| s.prefetch = 10).await;
    h.publish(&Step::ok(0, 2_000), props()).await;
    for id in 1..=6u64 {
        h.publish(&Step::ok(id, 0), props()).await;
    }
    eventually("steps 1 to 6", WAIT, || {
        (1..=6).all(|id| h.handled(id) == 1)
    })
    .await;
    // Longer than acknowledgements wait to be coalesced.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.handled(0), 1, "step 0 is still being handled");
    killer.kill();
    eventually("step 0 again, after the reconnection", WAIT, || {
        h.handled(0) == 2
    })
    .await;
    // The test's own channel went through the killed transport: look with
    // a new one.
    let connection = backend.transport.connect().await.expect("connect");
    let channel = connection.open_channel().await.expect("a channel");
    let queue = h.spec.queue.clone();
    eventually_async("step 0 acked the second time", WAIT, || async {
        let queue = channel.check_queue(&queue).await.expect("the queue");
        queue.messages == 0 && h.handled(0) == 2
    })
    .await;
    for id in 1..=6 {
        assert_eq!(h.handled(id), 1, "step {id} was acked before the kill");
    }
    let calls = h.journal.calls_for(0);
    assert_eq!(calls.len(), 2, "redelivered once");
    channel.close().await;
    connection.close().await;
    drop(killer);
    h.stop().await;
}

/// `retry = "delayed"`: on RabbitMQ 4.3 a failed message is rejected with
/// requeue and the quorum work queue holds it back on the linear ladder
/// (100, 200, 300 ms: the test consumer's delays), counted in
/// `x-delivery-count`; one that keeps failing ends in the dead-letter queue
/// with `x-error` and its count; a permanent one goes there at once; no
/// retry queue exists. On a broker that would ignore the arguments (3.10,
/// 4.0, the in-memory broker emulating 3.10) the consumer refuses to start,
/// naming the queue and the argument, and declares nothing.
async fn delayed_retries_wait_on_4_3_and_are_refused_before(backend: Backend) {
    let delayed = |spec: &mut ConsumerSpec| {
        spec.queue_type = Some(QueueType::Quorum);
        spec.retry = RetryBackend::Delayed;
    };
    if !backend.applies_delayed_retries() {
        let queue = unique("sem-delayed-refused");
        let started = Runtime::builder()
            .transport(Arc::clone(&backend.transport))
            .state(Journal::default())
            .handle_signals(false)
            .consumer_with(process_job, |s| {
                s.queue = queue.clone();
                delayed(s);
            })
            .start()
            .await;
        let error = match started {
            Err(error) => error,
            Ok(_) => panic!("a delayed consumer started on a broker that ignores delayed retries"),
        };
        let message = error.to_string();
        match error {
            Error::InvalidSpec {
                queue: refused,
                source: SpecError::DelayedUnsupported { argument, .. },
            } => {
                assert_eq!(refused, queue);
                assert_eq!(argument, "x-delayed-retry-type");
            }
            other => panic!("another error: {other}"),
        }
        assert!(
            message.contains(&queue)
                && message.contains("x-delayed-retry-type")
                && message.contains("retry = \"tiers\""),
            "{message}"
        );
        let connection = backend.transport.connect().await.expect("connect");
        let channel = connection.open_channel().await.expect("a channel");
        let work_queue = channel.check_queue(&queue).await;
        assert!(
            work_queue.as_ref().is_err_and(|e| e.is_not_found()),
            "nothing declared: {work_queue:?}"
        );
        connection.close().await;
        return;
    }
    let h = Harness::start(&backend, "sem-delayed", delayed).await;
    h.publish(&Job::new(1, Fail::Transient, Some(1)), props())
        .await;
    h.publish(&Job::new(2, Fail::Transient, None), props())
        .await;
    h.publish(&Job::new(3, Fail::Permanent, None), props())
        .await;
    let dead = h.dead_jobs(2).await;
    let [(2, exhausted), (3, permanent)] = &dead[..] else {
        panic!(
            "dead letters of jobs 2 and 3, not {:?}",
            dead.iter().map(|d| d.0).collect::<Vec<_>>()
        );
    };
    assert_dead_letter(exhausted, "exhausted", 3, "dependency unavailable (job 2)");
    // No tier: a count of 0, written.
    assert_dead_letter(permanent, "permanent", 0, "job 3 is invalid");
    eventually("job 1 retried to success", WAIT, || h.journal.reached(1, 1)).await;
    let counts = |id| -> Vec<u32> {
        h.journal
            .calls_for(id)
            .iter()
            .map(|s| s.retry_count)
            .collect()
    };
    assert_eq!(counts(1), [0, 1], "failed once, handled after the delay");
    assert_eq!(
        counts(2),
        [0, 1, 2, 3],
        "every retry held back, none at once"
    );
    assert_eq!(counts(3), [0], "a permanent failure never waits");
    for id in [1, 2] {
        let calls = h.journal.calls_for(id);
        for (gap, delay) in calls.windows(2).zip([100u64, 200, 300]) {
            let waited = gap[1].at.duration_since(gap[0].at);
            assert!(
                waited >= Duration::from_millis(delay),
                "job {id}: retry after {delay}ms came after {waited:?}"
            );
        }
    }
    let names = h.spec.names();
    let probe = backend.transport.connect().await.expect("connect");
    // A refused check closes its channel: one channel each.
    let channel = probe.open_channel().await.expect("a channel");
    assert!(
        channel
            .check_queue(&names.retry_queue(100))
            .await
            .is_err_and(|e| e.is_not_found()),
        "no retry queue is declared"
    );
    let channel = probe.open_channel().await.expect("a channel");
    assert!(
        channel
            .check_exchange(&names.retry_exchange)
            .await
            .is_err_and(|e| e.is_not_found()),
        "no retry exchange is declared"
    );
    probe.close().await;
    h.stop().await;
}

on_every_broker!(
    success_is_acked_once,
    each_tier_in_turn_then_success,
    exhausted_messages_carry_their_story,
    permanent_failures_skip_the_tiers,
    dead_letters_name_their_origin_where_the_queue_does_not,
    undecodable_bodies_are_dead_lettered,
    odd_retry_counts_are_read_tolerantly,
    the_retry_count_ignores_x_death,
    identity_and_headers_survive_every_hop,
    a_topology_conflict_names_the_queue_and_argument,
    a_nacked_retry_copy_keeps_the_original,
    an_unroutable_retry_copy_keeps_the_original,
    retries_return_only_to_their_own_queue_on_a_fanout_exchange,
    exponential_jittered_tiers_are_declared_and_used,
    a_panicking_handler_is_retried_and_the_consumer_keeps_running,
    a_hung_handler_times_out_and_is_retried,
    many_messages_with_mixed_outcomes_are_all_accounted_for,
    dead_letter_passes_past_their_window_keep_the_order,
    out_of_order_completions_are_acked_once_each,
    a_requeue_and_a_reject_in_the_middle_of_a_run,
    shutdown_in_the_middle_of_a_run_acks_exactly_what_finished,
    a_killed_connection_redelivers_exactly_what_had_not_finished,
    delayed_retries_wait_on_4_3_and_are_refused_before,
);

/// The cases where releases differ, on the in-memory broker emulating
/// RabbitMQ 4.3, on tokio's paused clock.
mod in_memory_4_3 {
    use rabbit_backoff::testing::Release;

    #[tokio::test(start_paused = true)]
    async fn delayed_retries_wait_on_4_3_and_are_refused_before() {
        super::delayed_retries_wait_on_4_3_and_are_refused_before(
            super::Backend::in_memory_emulating(Release::V4_3),
        )
        .await
    }
}
