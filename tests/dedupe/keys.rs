//! One handler run per key: duplicates published on purpose with each
//! store, a concurrent duplicate, a transient failure, a dead letter and its
//! replay, header keys and messages without one, a key's window.

use super::*;

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
