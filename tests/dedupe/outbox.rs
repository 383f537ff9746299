//! The transactional outbox: written with the handler's writes, relayed
//! after the commit and once after a crash, rolled back with a failed call;
//! and the start-up checks of `dedupe` and `Tx`.

use super::*;

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

/// Writes the effect of order `id` in the handler's transaction.
async fn insert_effect(tx: &Tx<'_>, shop: &Shop, id: u64) -> Result<(), OrderError> {
    sqlx::query(&format!(
        "INSERT INTO {} (order_id) VALUES ($1)",
        shop.table
    ))
    .bind(id as i64)
    .execute(&mut *tx.conn().await?)
    .await?;
    Ok(())
}

#[backoff_consumer(queue = "orders", delays = "100ms", dedupe = "24h")]
async fn place(order: Order, tx: Tx<'_>, shop: State<Shop>) -> Result<(), OrderError> {
    insert_effect(&tx, &shop, order.id).await?;
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
    insert_effect(&tx, &shop, order.id).await?;
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

    /// Closes the test's `publisher` and drops the table: the end of a test.
    async fn finish(&self, publisher: Publisher) {
        publisher.close().await;
        self.drop_table().await;
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
    shop.finish(publisher).await;
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
    shop.finish(publisher).await;
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
    shop.finish(publisher).await;
}
