//! A store that goes down: mid-run (requeued, nothing handled twice or
//! lost) and at start-up (waited for, health says why).

use super::*;

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
