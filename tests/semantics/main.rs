//! The per-message semantics, written once and run against every broker the
//! framework can talk to: `cargo test --test semantics rabbitmq` runs them
//! against the real RabbitMQ, `cargo test --test semantics in_memory` against
//! the in-memory broker of `rabbit_backoff::testing` on paused time. Each case
//! drives the broker only through the transport seam, so the same code
//! exercises both; a difference is a bug in the in-memory broker.
//!
//! One test binary: the harness and the list of cases here, the cases in a
//! file per behaviour.

#[path = "../common/mod.rs"]
mod common;
mod copies;
mod handlers;
mod headers;
mod outcomes;
mod runs;
mod topology;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::proxy::Proxy;
use common::seam::{OnBroker, assert_not_declared};
use common::*;
use rabbit_backoff::lapin::BasicProperties;
use rabbit_backoff::lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::Topology;
use rabbit_backoff::transport::{AmqpTransport, Transport};
use rabbit_backoff::{Consumer, ConsumerSpec, Error, Jitter, QueueType, RetryBackend, SpecError};
use serde::{Deserialize, Serialize};

// The cases, for `on_every_broker!` below.
use copies::*;
use handlers::*;
use headers::*;
use outcomes::*;
use runs::*;
use topology::*;

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

/// Declares `topology` as an operator would, for a consumer with
/// `declare = "passive"`.
async fn declare_as_operator(backend: &Backend, topology: &Topology) {
    let connection = backend.transport.connect().await.expect("connect");
    rabbit_backoff::topology::declare_topology(&*connection, topology)
        .await
        .expect("the operator's topology");
    connection.close().await;
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
