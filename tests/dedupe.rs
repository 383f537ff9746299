//! Consumers with `dedupe` on the real broker (and the in-memory one for
//! virtual time), with each store: duplicates published on purpose run the
//! handler once per key, a concurrent duplicate waits, a transient failure
//! frees the key, dead letters and their replays, header keys, messages
//! without a key, the start-up checks, the transactional outbox and its
//! relay, and stores that go down.

mod common;
#[path = "common/counters.rs"]
mod counters;

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

// ---- duplicates published on purpose ----

async fn duplicates_run_the_handler_once_per_key(store: impl DedupeStore, name: &str) {
    let service = Service::start(store, name, |spec| spec.prefetch = 20).await;
    let publisher = publisher().await;
    const KEYS: u64 = 30;
    for round in 0..3 {
        for id in 0..KEYS {
            let key = format!("{}-{id}", service.spec.queue);
            service.publish(&publisher, id, Mode::Ok, &key).await;
        }
        if round == 0 {
            eventually("the first copies handled", WAIT, || {
                service.calls.keys() == KEYS as usize
            })
            .await;
        }
    }
    service.drained().await;
    assert_eq!(service.calls.keys(), KEYS as usize);
    assert_eq!(service.calls.most(), 1, "a key was handled twice");
    assert_eq!(service.skipped(), 2 * KEYS);
    publisher.close().await;
    service.stop().await;
}

#[tokio::test]
async fn duplicates_published_on_purpose_run_the_handler_once_per_key_in_postgres() {
    let store = stores::postgres().await;
    let cleanup = PgCleanup { consumers: vec![] };
    let _ = cleanup;
    duplicates_run_the_handler_once_per_key(store, "dup-pg").await;
}

#[tokio::test]
async fn duplicates_published_on_purpose_run_the_handler_once_per_key_in_redis() {
    duplicates_run_the_handler_once_per_key(stores::redis().await, "dup-redis").await;
}

#[tokio::test]
async fn duplicates_published_on_purpose_run_the_handler_once_per_key_in_memory() {
    duplicates_run_the_handler_once_per_key(MemoryStore::new(), "dup-memory").await;
}

#[tokio::test]
async fn a_concurrent_duplicate_waits_and_never_runs_the_handler() {
    for store in [
        Box::new(stores::postgres().await) as Box<dyn DedupeStore>,
        Box::new(stores::redis().await),
    ] {
        let service = Service::start(Arc::<dyn DedupeStore>::from(store), "concurrent", |spec| {
            spec.prefetch = 4
        })
        .await;
        let publisher = publisher().await;
        let key = format!("{}-slow", service.spec.queue);
        // Both copies arrive while the first is in its handler.
        service.publish(&publisher, 1, Mode::Slow, &key).await;
        service.publish(&publisher, 1, Mode::Slow, &key).await;
        service.drained().await;
        assert_eq!(service.calls.of(1), 1);
        assert_eq!(service.skipped(), 1);
        publisher.close().await;
        service.stop().await;
    }
}

#[tokio::test]
async fn a_transient_failure_frees_the_key_for_its_retry() {
    let service = Service::start(stores::redis().await, "transient", |_| {}).await;
    let publisher = publisher().await;
    let key = format!("{}-t", service.spec.queue);
    service
        .publish(&publisher, 7, Mode::TransientOnce, &key)
        .await;
    eventually("the retry handled", WAIT, || service.calls.of(7) == 2).await;
    service
        .publish(&publisher, 7, Mode::TransientOnce, &key)
        .await;
    service.drained().await;
    assert_eq!(
        service.calls.of(7),
        2,
        "the retry ran, the duplicate did not"
    );
    assert_eq!(service.skipped(), 1);
    publisher.close().await;
    service.stop().await;
}

#[tokio::test]
async fn a_dead_letter_completes_its_key_and_a_replay_gets_a_new_chance() {
    let consumer_store = stores::postgres().await;
    let service = Service::start(consumer_store, "replayed", |_| {}).await;
    let _cleanup = PgCleanup {
        consumers: vec![service.spec.queue.clone()],
    };
    let publisher = publisher().await;
    let key = format!("{}-p", service.spec.queue);
    service.publish(&publisher, 3, Mode::Permanent, &key).await;
    service.publish(&publisher, 3, Mode::Permanent, &key).await;
    service.drained().await;
    assert_eq!(
        service.calls.of(3),
        1,
        "the duplicate of a dead letter is dropped"
    );
    let (_c, channel) = channel().await;
    let dead_letter_queue = service.spec.names().dead_letter_queue;
    assert_eq!(depth(&channel, &dead_letter_queue).await, 1);

    let dlq = Dlq::connect(&url(), &service.spec).await.unwrap();
    let replayed = dlq
        .replay(&DeadLetterFilter::default(), &ReplayOptions::default())
        .await
        .unwrap();
    assert_eq!(replayed.matched.len(), 1, "{replayed:?}");
    service.drained().await;
    assert_eq!(service.calls.of(3), 2, "the replay is handled");
    assert_eq!(depth(&channel, &dead_letter_queue).await, 1);
    publisher.close().await;
    service.stop().await;
}

#[tokio::test]
async fn a_header_key_and_a_message_without_a_key() {
    let header = "x-idempotency-key";
    let service = Service::start(MemoryStore::new(), "header", |spec| {
        spec.dedupe = Some(
            Dedupe::new(Duration::from_secs(3_600)).with_key(DedupeKey::Header(header.into())),
        );
    })
    .await;
    let publisher = publisher().await;
    let names = service.spec.names();
    for (id, key) in [(1, Some("a")), (1, Some("a")), (2, None), (2, None)] {
        // A fresh message_id each: only the header makes them duplicates.
        let mut message = Outgoing::json(&Payment { id, mode: Mode::Ok }).unwrap();
        if let Some(key) = key {
            message = message.header(header, key);
        }
        publisher
            .publish(&names.exchange, &names.routing_key, message)
            .await
            .unwrap();
    }
    service.drained().await;
    assert_eq!(service.calls.of(1), 1, "same header: handled once");
    assert_eq!(service.calls.of(2), 2, "no key: handled as without dedupe");
    assert_eq!(
        counter(rabbit_backoff::meters::WITHOUT_KEY, &service.spec.queue),
        2
    );
    publisher.close().await;
    service.stop().await;
}

// ---- start-up checks ----

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    id: u64,
    refuse: bool,
}

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[permanent]
    #[error("refused")]
    Refused,
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("{0}")]
    Encode(#[from] rabbit_backoff::Error),
}

/// Where `place` writes its effect and sends its messages.
struct Shop {
    table: String,
    notifications: String,
}

#[backoff_consumer(queue = "orders", delays = "100ms", dedupe = "24h")]
async fn place(order: Order, tx: Tx<'_>, shop: State<Shop>) -> Result<(), OrderError> {
    sqlx::query(&format!(
        "INSERT INTO {} (order_id) VALUES ($1)",
        shop.table
    ))
    .bind(order.id as i64)
    .execute(&mut *tx.conn().await?)
    .await?;
    for n in 0..2 {
        let note = Outgoing::json(&serde_json::json!({"order": order.id, "n": n}))?;
        tx.publish("", &shop.notifications, note).await?;
    }
    if order.refuse {
        return Err(OrderError::Refused);
    }
    Ok(())
}

/// Writes its effect and an outbox message, then fails the first call: its
/// immediate retry must not find the first call's writes.
#[backoff_consumer(queue = "orders", delays = "100ms", dedupe = "24h", immediate = 1)]
async fn place_twice(
    order: Order,
    tx: Tx<'_>,
    shop: State<Shop>,
    calls: State<Calls>,
) -> Result<(), OrderError> {
    sqlx::query(&format!(
        "INSERT INTO {} (order_id) VALUES ($1)",
        shop.table
    ))
    .bind(order.id as i64)
    .execute(&mut *tx.conn().await?)
    .await?;
    tx.publish("", &shop.notifications, Outgoing::json(&order)?)
        .await?;
    let first = {
        let mut calls = calls.0.lock().unwrap();
        let n = calls.entry(order.id).or_default();
        *n += 1;
        *n == 1
    };
    if first {
        return Err(OrderError::Db(sqlx::Error::PoolTimedOut));
    }
    Ok(())
}

#[backoff_consumer(queue = "orders", delays = "100ms")]
async fn place_without_dedupe(_order: Order, _tx: Tx<'_>) -> Result<(), OrderError> {
    Ok(())
}

#[tokio::test]
async fn start_up_refuses_dedupe_without_a_store_and_tx_without_a_transactional_store() {
    let missing = Runtime::builder()
        .state(Calls::default())
        .consumer_with(charge, |spec| spec.queue = "payments-eu".into())
        .build()
        .err()
        .expect("refused");
    assert!(
        matches!(&missing, Error::DedupeWithoutStore { queue } if queue == "payments-eu"),
        "{missing}"
    );
    assert!(missing.to_string().contains("dedupe_store"), "{missing}");

    let shop = || Shop {
        table: "t".into(),
        notifications: "n".into(),
    };
    let on_redis = Runtime::builder()
        .state(shop())
        .dedupe_store(stores::redis().await)
        .consumer(place)
        .build()
        .err()
        .expect("refused");
    assert!(
        matches!(&on_redis, Error::TransactionWithoutStore { queue, found } if queue == "orders" && found.contains("no transactions")),
        "{on_redis}"
    );
    let without_dedupe = Runtime::builder()
        .dedupe_store(stores::postgres().await)
        .consumer(place_without_dedupe)
        .build()
        .err()
        .expect("refused");
    assert!(
        matches!(&without_dedupe, Error::TransactionWithoutStore { found, .. } if found.contains("no dedupe")),
        "{without_dedupe}"
    );
    assert!(
        Runtime::builder()
            .state(shop())
            .dedupe_store(stores::postgres().await)
            .consumer(place)
            .build()
            .is_ok()
    );
}

// ---- window expiry on the in-memory broker, in virtual time ----

#[tokio::test(start_paused = true)]
async fn a_key_is_forgotten_after_its_window_on_the_in_memory_broker() {
    let broker = rabbit_backoff::testing::TestBroker::new();
    let calls = Calls::default();
    let runtime = Runtime::builder()
        .transport(broker.clone())
        .handle_signals(false)
        .state(calls.clone())
        .dedupe_store(MemoryStore::new())
        .consumer(charge)
        .start()
        .await
        .unwrap();
    let send = |broker: rabbit_backoff::testing::TestBroker| async move {
        let properties =
            rabbit_backoff::lapin::BasicProperties::default().with_message_id("payment-1".into());
        let body = serde_json::to_vec(&Payment {
            id: 1,
            mode: Mode::Ok,
        })
        .unwrap();
        broker
            .publish("payments", "payments", body, properties)
            .await;
        broker.run_until_idle().await;
    };
    send(broker.clone()).await;
    assert_eq!(calls.of(1), 1);
    tokio::time::advance(Duration::from_secs(23 * 3_600)).await;
    send(broker.clone()).await;
    assert_eq!(calls.of(1), 1, "within 24h: a duplicate");
    tokio::time::advance(Duration::from_secs(2 * 3_600)).await;
    send(broker.clone()).await;
    assert_eq!(calls.of(1), 2, "after 24h: handled again");
    assert_eq!(broker.queue_depth("payments"), 0);
    runtime.stop().await.unwrap();
}

// ---- the transactional outbox ----

struct ShopFixture {
    store: PostgresStore,
    table: String,
    notifications: String,
    queue: String,
    _cleanup: Cleanup,
    _pg: PgCleanup,
}

impl ShopFixture {
    async fn new(name: &str) -> Self {
        let store = stores::postgres().await;
        let queue = unique(name);
        let table = format!("effects_{}", queue.replace('.', "_"));
        sqlx::query(&format!("CREATE TABLE {table} (order_id bigint NOT NULL)"))
            .execute(store.pool())
            .await
            .unwrap();
        let notifications = format!("{queue}.notifications");
        let (_c, channel) = channel().await;
        channel
            .queue_declare(
                notifications.as_str().into(),
                lapin::options::QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                Default::default(),
            )
            .await
            .unwrap();
        let mut spec = place.spec();
        spec.queue = queue.clone();
        ShopFixture {
            _cleanup: Cleanup::of(&spec).queue(&notifications),
            _pg: PgCleanup {
                consumers: vec![queue.clone()],
            },
            store,
            table,
            notifications,
            queue,
        }
    }

    async fn runtime(&self, store: PostgresStore) -> RunningRuntime {
        Runtime::builder()
            .uri(url())
            .handle_signals(false)
            .state(Shop {
                table: self.table.clone(),
                notifications: self.notifications.clone(),
            })
            .dedupe_store(store)
            .consumer_with(place, |spec| spec.queue = self.queue.clone())
            .start()
            .await
            .unwrap()
    }

    async fn effects(&self) -> Vec<i64> {
        let rows: Vec<(i64,)> = sqlx::query_as(&format!(
            "SELECT order_id FROM {} ORDER BY order_id",
            self.table
        ))
        .fetch_all(self.store.pool())
        .await
        .unwrap();
        rows.into_iter().map(|(id,)| id).collect()
    }

    async fn publish(&self, publisher: &Publisher, id: u64, refuse: bool) {
        let message = Outgoing::json(&Order { id, refuse })
            .unwrap()
            .message_id(format!("{}-order-{id}", self.queue));
        publisher
            .publish(&self.queue, &self.queue, message)
            .await
            .unwrap();
    }

    /// The message ids of the notifications sent, taken off their queue.
    async fn notifications(&self) -> Vec<String> {
        let (_c, channel) = channel().await;
        let mut ids = Vec::new();
        while let Ok(Some(message)) = channel
            .basic_get(
                self.notifications.as_str().into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
        {
            ids.push(
                message
                    .properties
                    .message_id()
                    .as_ref()
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
            );
        }
        ids.sort();
        ids
    }

    async fn outbox_rows(&self) -> i64 {
        let (n,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM rabbit_backoff_outbox WHERE message_id LIKE $1")
                .bind(format!("{}-order-%", self.queue))
                .fetch_one(self.store.pool())
                .await
                .unwrap();
        n
    }

    async fn drop_table(&self) {
        let _ = sqlx::query(&format!("DROP TABLE {}", self.table))
            .execute(self.store.pool())
            .await;
    }
}

#[tokio::test]
async fn the_outbox_commits_with_the_handlers_writes_and_publishes_after_the_commit() {
    let shop = ShopFixture::new("outbox").await;
    let running = shop.runtime(stores::postgres().await).await;
    let publisher = publisher().await;
    shop.publish(&publisher, 1, false).await;
    shop.publish(&publisher, 1, false).await;
    shop.publish(&publisher, 2, true).await;
    let (_c, channel) = channel().await;
    let dead_letters = format!("{}.dlq", shop.queue);
    eventually_async("the refused order dead-lettered", WAIT, || async {
        depth(&channel, &dead_letters).await == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        shop.effects().await,
        vec![1],
        "order 1 once; order 2 rolled back"
    );
    assert_eq!(
        shop.notifications().await,
        vec![
            format!("{}-order-1/1", shop.queue),
            format!("{}-order-1/2", shop.queue)
        ],
        "order 1's two messages once each, with ids from its own; none of order 2's"
    );
    assert_eq!(
        shop.outbox_rows().await,
        0,
        "dispatched messages are deleted"
    );
    running.stop().await.unwrap();
    publisher.close().await;
    shop.drop_table().await;
}

#[tokio::test]
async fn outbox_messages_left_by_a_process_that_died_after_its_commit_are_relayed_once() {
    let shop = ShopFixture::new("relay").await;
    // A process that commits and never dispatches: what a kill between the
    // commit and the dispatch leaves.
    let dying = shop
        .runtime(stores::postgres().await.without_dispatch())
        .await;
    let publisher = publisher().await;
    for id in 1..=5 {
        shop.publish(&publisher, id, false).await;
    }
    eventually_async("five orders committed", WAIT, || async {
        shop.effects().await.len() == 5
    })
    .await;
    dying.stop().await.unwrap();
    assert!(shop.notifications().await.is_empty());
    assert_eq!(shop.outbox_rows().await, 10);

    // Two running processes: each relays, at start and every interval.
    let fast = || {
        let store = shop.store.clone();
        store.with_relay_interval(Duration::from_millis(200))
    };
    let (a, b) = tokio::join!(shop.runtime(fast()), shop.runtime(fast()));
    eventually_async("the outbox emptied", WAIT, || async {
        shop.outbox_rows().await == 0
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sent = shop.notifications().await;
    let expected: Vec<String> = (1..=5)
        .flat_map(|id| {
            let key = format!("{}-order-{id}", shop.queue);
            [format!("{key}/1"), format!("{key}/2")]
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(sent, expected, "each outbox message exactly once");
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    publisher.close().await;
    shop.drop_table().await;
}

#[tokio::test]
async fn an_immediate_retry_rolls_back_the_failed_calls_writes() {
    let shop = ShopFixture::new("immediate").await;
    let calls = Calls::default();
    let running = Runtime::builder()
        .uri(url())
        .handle_signals(false)
        .state(Shop {
            table: shop.table.clone(),
            notifications: shop.notifications.clone(),
        })
        .state(calls.clone())
        .dedupe_store(stores::postgres().await)
        .consumer_with(place_twice, |spec| spec.queue = shop.queue.clone())
        .start()
        .await
        .unwrap();
    let publisher = publisher().await;
    shop.publish(&publisher, 9, false).await;
    eventually_async("the order handled on its immediate retry", WAIT, || async {
        calls.of(9) == 2 && shop.outbox_rows().await == 0 && !shop.effects().await.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(shop.effects().await, vec![9], "one effect row, not two");
    assert_eq!(
        shop.notifications().await,
        vec![format!("{}-order-9/1", shop.queue)],
        "one outbox message, numbered from 1 again"
    );
    running.stop().await.unwrap();
    publisher.close().await;
    shop.drop_table().await;
}

// ---- stores that go down ----

async fn goes_down_and_comes_back(store: impl DedupeStore, proxy: &mut Proxy, name: &str) {
    let service = Service::start(store, name, |spec| spec.prefetch = 10).await;
    let publisher = publisher().await;
    let key = |id: u64| format!("{}-{id}", service.spec.queue);
    for id in 0..10 {
        service.publish(&publisher, id, Mode::Ok, &key(id)).await;
    }
    eventually("the first ten handled", WAIT, || service.calls.keys() == 10).await;

    proxy.cut();
    for id in 10..20 {
        service.publish(&publisher, id, Mode::Ok, &key(id)).await;
    }
    let mut health = service.health.clone();
    tokio::time::timeout(WAIT, async {
        loop {
            if let Health::StoreUnavailable(why) = health.current() {
                assert!(why.contains(&proxy.port.to_string()), "{why}");
                break;
            }
            health.changed().await;
        }
    })
    .await
    .expect("health says the store is down");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        service.calls.keys(),
        10,
        "nothing handled without the store"
    );

    proxy.restore().await;
    eventually("every message handled once the store is back", WAIT, || {
        service.calls.keys() == 20
    })
    .await;
    service.drained().await;
    assert_eq!(service.calls.most(), 1, "none handled twice");
    assert_eq!(service.health.current(), Health::Ready);
    publisher.close().await;
    service.stop().await;
}

#[tokio::test]
async fn postgres_down_mid_run_requeues_and_nothing_is_handled_twice_or_lost() {
    let mut proxy = Proxy::start(5432).await;
    let store = PostgresStore::connect(&format!(
        "postgres://postgres@127.0.0.1:{}/test",
        proxy.port
    ))
    .await
    .unwrap();
    goes_down_and_comes_back(store, &mut proxy, "pg-down").await;
}

#[tokio::test]
async fn redis_down_mid_run_requeues_and_nothing_is_handled_twice_or_lost() {
    let mut proxy = Proxy::start(6379).await;
    let store = RedisStore::connect(&format!("redis://127.0.0.1:{}", proxy.port))
        .await
        .unwrap();
    goes_down_and_comes_back(store, &mut proxy, "redis-down").await;
}

#[tokio::test]
async fn redis_down_at_start_up_is_waited_for_and_health_says_why() {
    let mut proxy = Proxy::start(6379).await;
    proxy.cut();
    let store = RedisStore::connect(&format!("redis://127.0.0.1:{}", proxy.port))
        .await
        .unwrap();
    down_at_start_up(store, &mut proxy).await;
}

#[tokio::test]
async fn postgres_down_at_start_up_is_waited_for_and_health_says_why() {
    let mut proxy = Proxy::start(5432).await;
    proxy.cut();
    let store = PostgresStore::connect(&format!(
        "postgres://postgres@127.0.0.1:{}/test",
        proxy.port
    ))
    .await
    .expect("the service starts while PostgreSQL is down");
    down_at_start_up(store, &mut proxy).await;
}

async fn down_at_start_up(store: impl DedupeStore, proxy: &mut Proxy) {
    let queue = unique("down-at-start");
    let calls = Calls::default();
    let runtime = Runtime::builder()
        .uri(url())
        .handle_signals(false)
        .reconnect_backoff(Duration::from_millis(100), Duration::from_millis(500))
        .state(calls.clone())
        .dedupe_store(store)
        .consumer_with(charge, |spec| spec.queue = queue.clone())
        .build()
        .unwrap();
    let spec = runtime.specs().next().cloned().unwrap();
    let _cleanup = Cleanup::of(&spec);
    let mut health = runtime.health();
    let shutdown = runtime.shutdown_handle();
    let task = tokio::spawn(runtime.run());
    tokio::time::timeout(WAIT, async {
        while !matches!(health.current(), Health::StoreUnavailable(_)) {
            health.changed().await;
        }
    })
    .await
    .expect("health says the store is down");
    let Health::StoreUnavailable(why) = health.current() else {
        unreachable!()
    };
    assert!(why.contains(&proxy.port.to_string()), "{why}");
    let publisher = publisher().await;
    let names = spec.names();
    publisher
        .publish(
            &names.exchange,
            &names.routing_key,
            Outgoing::json(&Payment {
                id: 1,
                mode: Mode::Ok,
            })
            .unwrap()
            .message_id(format!("{queue}-1")),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(calls.total(), 0, "nothing consumed without the store");

    proxy.restore().await;
    tokio::time::timeout(WAIT, health.wait_ready())
        .await
        .expect("ready once the store answers")
        .unwrap();
    eventually("handled", WAIT, || calls.of(1) == 1).await;
    shutdown.shutdown();
    task.await.unwrap().unwrap();
    publisher.close().await;
}
