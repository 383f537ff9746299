//! Consumers with `dedupe` on the real broker (and the in-memory one for
//! virtual time), with each store: duplicates published on purpose run the
//! handler once per key, a concurrent duplicate waits, a transient failure
//! frees the key, dead letters and their replays, header keys, messages
//! without a key, the start-up checks, the transactional outbox and its
//! relay, and stores that go down.
//!
//! One test binary: the payment service here, a file per behaviour.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/counters.rs"]
mod counters;
mod keys;
mod outbox;
mod stores_down;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::stores::{self, PgCleanup, Proxy};
use common::*;
use counters::{counter, snapshotter};
use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, ReplayOptions};
use rabbit_backoff::dedupe::{DedupeStore, MemoryStore, PostgresStore, RedisStore, Tx, sqlx};
use rabbit_backoff::prelude::*;
use rabbit_backoff::{Dedupe, DedupeKey, Error, Health, HealthWatch, RunningRuntime};
use serde::{Deserialize, Serialize};

const WAIT: Duration = Duration::from_secs(60);

// ---- the consumer ----

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
enum Mode {
    Ok,
    Slow,
    TransientOnce,
    Permanent,
}

#[derive(Debug, Serialize, Deserialize)]
struct Payment {
    id: u64,
    mode: Mode,
}

#[derive(Debug, thiserror::Error, Classify)]
enum PaymentError {
    #[error("gateway down")]
    Down,
    #[permanent]
    #[error("card refused")]
    Refused,
}

/// How many times the handler ran, per payment id.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<HashMap<u64, u32>>>);

impl Calls {
    fn of(&self, id: u64) -> u32 {
        self.0.lock().unwrap().get(&id).copied().unwrap_or(0)
    }
    fn total(&self) -> u32 {
        self.0.lock().unwrap().values().sum()
    }
    fn keys(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn most(&self) -> u32 {
        self.0.lock().unwrap().values().copied().max().unwrap_or(0)
    }
}

#[backoff_consumer(queue = "payments", delays = "100ms", dedupe = "24h")]
async fn charge(payment: Payment, ctx: &Context, calls: State<Calls>) -> Result<(), PaymentError> {
    *calls.0.lock().unwrap().entry(payment.id).or_default() += 1;
    match payment.mode {
        Mode::Ok => Ok(()),
        Mode::Slow => {
            tokio::time::sleep(Duration::from_millis(400)).await;
            Ok(())
        }
        Mode::TransientOnce if ctx.retry_count() == 0 => Err(PaymentError::Down),
        Mode::TransientOnce => Ok(()),
        Mode::Permanent => Err(PaymentError::Refused),
    }
}

struct Service {
    spec: ConsumerSpec,
    calls: Calls,
    running: Option<RunningRuntime>,
    health: HealthWatch,
    _cleanup: Cleanup,
}

impl Service {
    /// `charge` on a unique queue with `store`, consuming.
    async fn start(
        store: impl DedupeStore,
        name: &str,
        configure: impl FnOnce(&mut ConsumerSpec),
    ) -> Service {
        snapshotter();
        let queue = unique(name);
        let calls = Calls::default();
        let runtime = Runtime::builder()
            .uri(url())
            .handle_signals(false)
            .shutdown_grace(Duration::from_secs(5))
            .state(calls.clone())
            .dedupe_store(store)
            .consumer_with(charge, |spec| {
                spec.queue = queue;
                configure(spec);
            })
            .build()
            .expect("a valid runtime");
        let spec = runtime.specs().next().cloned().unwrap();
        let cleanup = Cleanup::of(&spec);
        let health = runtime.health();
        let running = tokio::time::timeout(WAIT, runtime.start())
            .await
            .expect("ready in time")
            .expect("the runtime starts");
        Service {
            spec,
            calls,
            running: Some(running),
            health,
            _cleanup: cleanup,
        }
    }

    async fn publish(&self, publisher: &Publisher, id: u64, mode: Mode, key: &str) {
        let names = self.spec.names();
        let message = Outgoing::json(&Payment { id, mode })
            .unwrap()
            .message_id(key);
        publisher
            .publish(&names.exchange, &names.routing_key, message)
            .await
            .unwrap();
    }

    /// Waits until the work queue and its retry queues are empty and
    /// nothing is unacknowledged.
    async fn drained(&self) {
        let (_c, channel) = channel().await;
        let deadline = std::time::Instant::now() + WAIT;
        let topology = rabbit_backoff::topology::Topology::of(&self.spec);
        loop {
            let mut busy = 0;
            for queue in std::iter::once(&topology.work_queue).chain(&topology.retry_queues) {
                let q = channel
                    .queue_declare(
                        queue.name.as_str().into(),
                        lapin::options::QueueDeclareOptions {
                            passive: true,
                            ..Default::default()
                        },
                        Default::default(),
                    )
                    .await
                    .unwrap();
                busy += q.message_count();
            }
            if busy == 0 && self.quiet().await {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{busy} messages left");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// No handler calls over 700 ms (longer than a requeue's pause).
    async fn quiet(&self) -> bool {
        let before = self.calls.total();
        let skipped = counter(rabbit_backoff::meters::DUPLICATES_SKIPPED, &self.spec.queue);
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        before == self.calls.total()
            && skipped == counter(rabbit_backoff::meters::DUPLICATES_SKIPPED, &self.spec.queue)
    }

    fn skipped(&self) -> u64 {
        counter(rabbit_backoff::meters::DUPLICATES_SKIPPED, &self.spec.queue)
    }

    async fn stop(mut self) {
        if let Some(running) = self.running.take() {
            running.stop().await.expect("stops cleanly");
        }
    }
}
