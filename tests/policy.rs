//! Retry policy decided by the error: a variant's own ladder, discard,
//! retry-after, a deadline (`max_age`) and immediate retries, against the
//! real broker (`cargo test --test policy rabbitmq`) and the in-memory one
//! (`cargo test --test policy in_memory`).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::seam::OnBroker;
use common::*;
use rabbit_backoff::ConsumerSpec;
use rabbit_backoff::prelude::*;
use rabbit_backoff::transport::{AmqpTransport, Delivery, Transport};
use serde::{Deserialize, Serialize};

const WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Transient,
    Slow,
    Obsolete,
    /// Asks to be retried after 700 ms.
    RateLimited,
    /// Fails transiently while the dependency is down.
    Dependency,
}

/// Fails in `mode` for its first `failures` calls, then succeeds.
#[derive(Debug, Serialize, Deserialize)]
struct PolicyJob {
    id: u64,
    mode: Mode,
    failures: u32,
}

#[derive(Debug, thiserror::Error, Classify)]
enum PolicyError {
    #[error("dependency unavailable")]
    Transient,
    #[retry(delays = "150ms,250ms")]
    #[error("slow dependency")]
    Slow,
    #[discard]
    #[error("obsolete order")]
    Obsolete,
    #[error("rate limited")]
    RateLimited {
        #[retry_after]
        wait: Duration,
    },
}

/// One call: the retry count and the retry queue the message came back from.
#[derive(Debug, Clone)]
struct Call {
    retry_count: u32,
    came_from: Option<String>,
}

#[derive(Default, Clone)]
struct Calls(Arc<Mutex<BTreeMap<u64, Vec<Call>>>>);

/// Whether the handler's dependency is down.
#[derive(Default, Clone)]
struct Outage(Arc<std::sync::atomic::AtomicBool>);

impl Outage {
    fn set(&self, down: bool) {
        self.0.store(down, std::sync::atomic::Ordering::SeqCst);
    }
    fn is_down(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Calls {
    fn of(&self, id: u64) -> Vec<Call> {
        self.0.lock().unwrap().get(&id).cloned().unwrap_or_default()
    }
}

#[backoff_consumer(queue = "placeholder", delays = "100ms,1s,5s")]
async fn policy_job(
    job: PolicyJob,
    ctx: &Context,
    calls: State<Calls>,
    outage: State<Outage>,
) -> Result<(), PolicyError> {
    let seen = {
        let mut all = calls.0.lock().unwrap();
        let entry = all.entry(job.id).or_default();
        entry.push(Call {
            retry_count: ctx.retry_count(),
            came_from: last_death_queue(ctx),
        });
        entry.len() as u32
    };
    if let Mode::Dependency = job.mode {
        return if outage.is_down() {
            Err(PolicyError::Transient)
        } else {
            Ok(())
        };
    }
    if seen > job.failures {
        return Ok(());
    }
    Err(match job.mode {
        Mode::Transient | Mode::Dependency => PolicyError::Transient,
        Mode::Slow => PolicyError::Slow,
        Mode::Obsolete => PolicyError::Obsolete,
        Mode::RateLimited => PolicyError::RateLimited {
            wait: Duration::from_millis(700),
        },
    })
}

/// `policy_job` on a unique queue, on a broker.
struct Harness {
    on: OnBroker,
    calls: Calls,
    outage: Outage,
    health: rabbit_backoff::HealthWatch,
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
        transport: Arc<dyn Transport>,
        shared: bool,
        name: &str,
        configure: impl FnOnce(&mut ConsumerSpec),
    ) -> Self {
        let queue = unique(name);
        let (calls, outage) = (Calls::default(), Outage::default());
        let builder = Runtime::builder()
            .state(calls.clone())
            .state(outage.clone())
            .consumer_with(policy_job, |spec| {
                spec.queue = queue.clone();
                configure(spec);
            });
        let on = OnBroker::start(transport, shared, builder).await;
        let health = on.health();
        Harness {
            on,
            calls,
            outage,
            health,
        }
    }

    async fn publish(&self, job: &PolicyJob) {
        let properties = rabbit_backoff::lapin::BasicProperties::default().with_delivery_mode(2);
        self.on.publish_json(job, properties).await;
    }

    async fn stop(self) {
        self.on.stop().await;
    }

    /// Publishes job 1, which keeps failing transiently, and takes its dead
    /// letter, checking it was dead-lettered for `reason`.
    async fn dead_letter_of_a_failing_job(&self, reason: &str) -> Delivery {
        self.publish(&PolicyJob {
            id: 1,
            mode: Mode::Transient,
            failures: 10,
        })
        .await;
        let dead = self.next_dead_letter().await;
        assert_eq!(
            header_str(&dead.properties, "x-dead-letter-reason").as_deref(),
            Some(reason)
        );
        dead
    }
}

async fn a_variants_own_ladder_is_used(transport: Arc<dyn Transport>, shared: bool) {
    let h = Harness::start(transport, shared, "policy-ladder", |_| {}).await;
    // Its ladder's queues are declared with the consumer's.
    let names = h.spec.names();
    for ms in [150, 250] {
        assert_eq!(h.depth(&names.retry_queue(ms)).await, 0, "{ms}ms declared");
    }
    h.publish(&PolicyJob {
        id: 1,
        mode: Mode::Slow,
        failures: 2,
    })
    .await;
    h.publish(&PolicyJob {
        id: 2,
        mode: Mode::Transient,
        failures: 1,
    })
    .await;
    eventually("both done", WAIT, || {
        h.calls.of(1).len() == 3 && h.calls.of(2).len() == 2
    })
    .await;
    let slow: Vec<Option<String>> = h.calls.of(1).into_iter().map(|c| c.came_from).collect();
    assert_eq!(
        slow,
        [
            None,
            Some(names.retry_queue(150)),
            Some(names.retry_queue(250))
        ],
        "the variant's ladder, tier by tier"
    );
    assert_eq!(
        h.calls.of(2)[1].came_from,
        Some(names.retry_queue(100)),
        "other variants keep the consumer's ladder"
    );
    h.stop().await;
}

async fn a_discarded_message_is_acked_and_gone(transport: Arc<dyn Transport>, shared: bool) {
    let mut h = Harness::start(transport, shared, "policy-discard", |_| {}).await;
    h.publish(&PolicyJob {
        id: 1,
        mode: Mode::Obsolete,
        failures: 1,
    })
    .await;
    eventually("the call", WAIT, || !h.calls.of(1).is_empty()).await;
    h.stop_consumer().await;
    let names = h.spec.names();
    assert_eq!(h.depth(&h.spec.queue).await, 0, "acked");
    assert_eq!(
        h.depth(&names.dead_letter_queue).await,
        0,
        "not dead-lettered"
    );
    for ms in h.spec.retry_delays() {
        assert_eq!(h.depth(&names.retry_queue(ms)).await, 0, "not retried");
    }
    assert_eq!(h.calls.of(1).len(), 1);
    h.stop().await;
}

async fn retry_after_takes_the_smallest_tier_long_enough(
    transport: Arc<dyn Transport>,
    shared: bool,
) {
    let h = Harness::start(transport, shared, "policy-after", |_| {}).await;
    h.publish(&PolicyJob {
        id: 1,
        mode: Mode::RateLimited,
        failures: 1,
    })
    .await;
    eventually("the retry", WAIT, || h.calls.of(1).len() == 2).await;
    let calls = h.calls.of(1);
    assert_eq!(calls[1].came_from, Some(h.spec.names().retry_queue(1_000)));
    assert_eq!(calls[1].retry_count, 1, "it uses up an attempt");
    h.stop().await;
}

async fn max_age_dead_letters_as_expired(transport: Arc<dyn Transport>, shared: bool) {
    let h = Harness::start(transport, shared, "policy-age", |s| {
        s.delays = "300ms,400ms".parse().unwrap();
        s.max_age = Some(Duration::from_millis(200));
    })
    .await;
    let dead = h.dead_letter_of_a_failing_job("expired").await;
    assert!(header_str(&dead.properties, "x-first-failed-at").is_some());
    assert!(
        header_str(&dead.properties, "x-retried-at").is_some(),
        "its retry copy said when it entered the tier"
    );
    assert_eq!(h.calls.of(1).len(), 2, "failed, retried once, then too old");
    h.stop().await;
}

/// Without a `max_age`, a first retry copy carries only its count; its
/// dead letter still says when it first failed, from the broker's record of
/// the copy's expiry from its tier (to the second).
async fn the_first_failure_is_read_from_the_brokers_record(
    transport: Arc<dyn Transport>,
    shared: bool,
) {
    let h = Harness::start(transport, shared, "policy-first", |s| {
        s.delays = "1s".parse().unwrap();
    })
    .await;
    let published = framework_now();
    let dead = h.dead_letter_of_a_failing_job("exhausted").await;
    assert_eq!(h.calls.of(1).len(), 2, "failed, retried once");
    assert_eq!(
        header_str(&dead.properties, "x-retried-at"),
        None,
        "its retry copy carried only its count"
    );
    let time = |name| {
        let text = header_str(&dead.properties, name).unwrap_or_else(|| panic!("{name}"));
        rabbit_backoff::rules::parse_failed_at(&text).unwrap_or_else(|| panic!("{name}: {text}"))
    };
    let (first, failed) = (time("x-first-failed-at"), time("x-failed-at"));
    assert!(
        first + Duration::from_millis(1_050) >= published
            && first <= published + Duration::from_millis(500),
        "the first failure, read to the second: {:?} after the publish",
        first.duration_since(published)
    );
    assert!(
        failed.duration_since(first).unwrap() >= Duration::from_secs(1),
        "it waited out its 1 s tier in between"
    );
    h.stop().await;
}

/// Now on the framework's clock, which follows tokio's paused clock.
fn framework_now() -> std::time::SystemTime {
    let skew = tokio::time::Instant::now()
        .into_std()
        .saturating_duration_since(std::time::Instant::now());
    std::time::SystemTime::now() + skew
}

async fn immediate_retries_stay_in_the_process(transport: Arc<dyn Transport>, shared: bool) {
    let h = Harness::start(transport, shared, "policy-immediate", |s| {
        s.immediate = 2;
    })
    .await;
    h.publish(&PolicyJob {
        id: 1,
        mode: Mode::Transient,
        failures: 2,
    })
    .await;
    eventually("three calls", WAIT, || h.calls.of(1).len() == 3).await;
    assert!(
        h.calls
            .of(1)
            .iter()
            .all(|c| c.retry_count == 0 && c.came_from.is_none()),
        "no retry queue was touched"
    );
    h.stop().await;
}

async fn a_breaker_holds_messages_while_a_dependency_is_down(
    transport: Arc<dyn Transport>,
    shared: bool,
) {
    let h = Harness::start(transport, shared, "policy-breaker", |s| {
        s.delays = "100ms,200ms,400ms".parse().unwrap();
        s.breaker = Some("50% of 20, pause 1s".parse().unwrap());
    })
    .await;
    h.outage.set(true);
    let mut health = h.health.clone();
    let paused = tokio::spawn(async move {
        while let Some(state) = health.changed().await {
            if matches!(state, rabbit_backoff::Health::Paused(_)) {
                return true;
            }
        }
        false
    });
    for id in 0..1000 {
        h.publish(&PolicyJob {
            id,
            mode: Mode::Dependency,
            failures: 0,
        })
        .await;
    }
    // The dependency stays down for 10 s.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let failed_during_outage: usize = (0..1000).map(|id| h.calls.of(id).len()).sum();
    h.outage.set(false);
    eventually("every message called", Duration::from_secs(60), || {
        h.calls.0.lock().unwrap().len() == 1000
    })
    .await;
    // Every call after the outage succeeds: once the work queue, the tiers and
    // the DLQ are empty, every message was acked as handled.
    let names = h.spec.names();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while h.depth(&h.spec.queue).await > 0 || retrying(&h).await > 0 {
        assert!(std::time::Instant::now() < deadline, "everything settles");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        h.depth(&names.dead_letter_queue).await,
        0,
        "nothing dead-lettered"
    );
    println!("calls during the 10 s outage: {failed_during_outage} for 1000 messages");
    assert!(
        failed_during_outage < 100,
        "the breaker stopped consuming: {failed_during_outage} calls during the outage"
    );
    assert!(paused.await.unwrap(), "health said Paused");
    h.stop().await;
}

/// Messages waiting in the retry tiers.
async fn retrying(h: &Harness) -> u32 {
    let names = h.spec.names();
    let mut total = 0;
    for ms in h.spec.retry_delays() {
        total += h.depth(&names.retry_queue(ms)).await;
    }
    total
}

fn in_memory() -> (Arc<dyn Transport>, bool) {
    (Arc::new(rabbit_backoff::testing::TestBroker::new()), false)
}

fn rabbitmq() -> (Arc<dyn Transport>, bool) {
    (Arc::new(AmqpTransport::new(url())), true)
}

macro_rules! on_every_broker {
    ($($case:ident),* $(,)?) => {
        /// Against the real RabbitMQ at `AMQP_URL`.
        mod rabbitmq {
            $(
                #[tokio::test]
                async fn $case() {
                    let (transport, shared) = super::rabbitmq();
                    super::$case(transport, shared).await
                }
            )*
        }

        /// Against the in-memory broker, on tokio's paused clock.
        mod in_memory {
            $(
                #[tokio::test(start_paused = true)]
                async fn $case() {
                    let (transport, shared) = super::in_memory();
                    super::$case(transport, shared).await
                }
            )*
        }
    };
}

on_every_broker!(
    a_variants_own_ladder_is_used,
    a_discarded_message_is_acked_and_gone,
    retry_after_takes_the_smallest_tier_long_enough,
    max_age_dead_letters_as_expired,
    the_first_failure_is_read_from_the_brokers_record,
    immediate_retries_stay_in_the_process,
    a_breaker_holds_messages_while_a_dependency_is_down,
);
