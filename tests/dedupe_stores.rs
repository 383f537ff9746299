//! The dedupe stores on their own, against the real PostgreSQL and Redis
//! (and the memory store): one key claimed at a time, completed keys
//! answered as duplicates within their window, released keys free again, a
//! held key freed when its holder disappears, and a store that does not
//! answer reported as such.

mod common;

use std::time::Duration;

use common::stores::{self, PgCleanup};
use common::unique;
use rabbit_backoff::dedupe::sqlx;
use rabbit_backoff::dedupe::{
    Claim, ClaimRequest, DedupeStore, HeldKey, MemoryStore, PostgresStore, RedisStore, StoreError,
};

/// A claim for a handler that takes the store's transaction (`Tx`).
fn request<'a>(consumer: &'a str, key: &'a str, window: Duration) -> ClaimRequest<'a> {
    ClaimRequest::new(consumer, key, window).with_transaction(true)
}

/// A claim for a handler that does not: batched, with a lease, on PostgreSQL.
fn without_tx(request: ClaimRequest<'_>) -> ClaimRequest<'_> {
    request.with_transaction(false)
}

async fn claim(store: &dyn DedupeStore, consumer: &str, key: &str) -> Claim {
    claim_as(store, consumer, key, true).await
}

async fn claim_as(store: &dyn DedupeStore, consumer: &str, key: &str, tx: bool) -> Claim {
    let mut request = request(consumer, key, Duration::from_secs(60));
    if !tx {
        request = without_tx(request);
    }
    store.claim(request).await.expect("the store answers")
}

/// A claim with a lease (a handler without `Tx`) for a key of `window`.
async fn lease_claim(
    store: &dyn DedupeStore,
    consumer: &str,
    key: &str,
    window: Duration,
) -> Claim {
    store
        .claim(without_tx(request(consumer, key, window)))
        .await
        .expect("the store answers")
}

fn held(claim: Claim) -> Box<dyn HeldKey> {
    match claim {
        Claim::Claimed(held) => held,
        other => panic!("expected the key to be claimed, got {other:?}"),
    }
}

/// What every store guarantees.
async fn contract(store: &dyn DedupeStore, consumer: &str, tx: bool) {
    let other_consumer = format!("{consumer}-other");

    // One holder at a time; another consumer has keys of its own.
    let first = held(claim_as(store, consumer, "k1", tx).await);
    assert!(matches!(
        claim_as(store, consumer, "k1", tx).await,
        Claim::InProgress
    ));
    let theirs = held(claim_as(store, &other_consumer, "k1", tx).await);
    theirs.release().await.unwrap();

    // Completed: a duplicate for the window.
    first.complete().await.unwrap();
    for _ in 0..3 {
        let again = claim_as(store, consumer, "k1", tx).await;
        assert!(matches!(again, Claim::Duplicate), "{again:?}");
    }

    // Released (a transient failure): free for the retry.
    held(claim_as(store, consumer, "k2", tx).await)
        .release()
        .await
        .unwrap();
    let retry = held(claim_as(store, consumer, "k2", tx).await);

    // Completed after a failure (dead-lettered, discarded): a duplicate too.
    retry.complete_failed().await.unwrap();
    assert!(matches!(
        claim_as(store, consumer, "k2", tx).await,
        Claim::Duplicate
    ));

    // A holder that disappears without a word frees the key.
    drop(held(claim_as(store, consumer, "k3", tx).await));
    let mut freed = false;
    for _ in 0..50 {
        if let Claim::Claimed(again) = claim_as(store, consumer, "k3", tx).await {
            again.release().await.unwrap();
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed, "a dropped claim frees its key");

    // Many claims of one key at once: exactly one wins.
    let claims =
        futures_util::future::join_all((0..20).map(|_| claim_as(store, consumer, "k4", tx))).await;
    let winners = claims
        .iter()
        .filter(|c| matches!(c, Claim::Claimed(_)))
        .count();
    assert_eq!(winners, 1, "{claims:?}");
}

#[tokio::test]
async fn memory_store_keeps_the_contract() {
    contract(&MemoryStore::new(), &unique("memory"), true).await;
}

#[tokio::test]
async fn postgres_store_keeps_the_contract() {
    let consumer = unique("pg");
    let _cleanup = PgCleanup {
        consumers: vec![consumer.clone(), format!("{consumer}-other")],
    };
    contract(&stores::postgres().await, &consumer, true).await;
}

#[tokio::test]
async fn postgres_store_keeps_the_contract_for_handlers_without_tx() {
    let consumer = unique("pg-lease");
    let _cleanup = PgCleanup {
        consumers: vec![consumer.clone(), format!("{consumer}-other")],
    };
    contract(&stores::postgres().await, &consumer, false).await;
}

#[tokio::test]
async fn redis_store_keeps_the_contract() {
    contract(&stores::redis().await, &unique("redis"), true).await;
}

#[tokio::test(start_paused = true)]
async fn memory_store_forgets_a_key_after_its_window_on_tokios_clock() {
    let store = MemoryStore::new();
    let window = Duration::from_secs(86_400);
    let claimed = store.claim(request("c", "k", window)).await.unwrap();
    held(claimed).complete().await.unwrap();
    tokio::time::advance(window - Duration::from_secs(1)).await;
    assert!(matches!(
        store.claim(request("c", "k", window)).await.unwrap(),
        Claim::Duplicate
    ));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(matches!(
        store.claim(request("c", "k", window)).await.unwrap(),
        Claim::Claimed(_)
    ));
}

/// A real window of 1 s on each server store.
async fn window_expires(store: &dyn DedupeStore, consumer: &str, tx: bool) {
    let window = Duration::from_secs(1);
    let request = |consumer, key, window| {
        let request = request(consumer, key, window);
        if tx { request } else { without_tx(request) }
    };
    let claimed = store.claim(request(consumer, "k", window)).await.unwrap();
    held(claimed).complete().await.unwrap();
    assert!(matches!(
        store.claim(request(consumer, "k", window)).await.unwrap(),
        Claim::Duplicate
    ));
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let again = held(store.claim(request(consumer, "k", window)).await.unwrap());
    again.release().await.unwrap();
}

#[tokio::test]
async fn postgres_and_redis_forget_a_key_after_its_window() {
    let consumer = unique("window");
    let _cleanup = PgCleanup {
        consumers: vec![consumer.clone(), format!("{consumer}-lease")],
    };
    window_expires(&stores::postgres().await, &consumer, true).await;
    window_expires(
        &stores::postgres().await,
        &format!("{consumer}-lease"),
        false,
    )
    .await;
    window_expires(&stores::redis().await, &consumer, true).await;
}

#[tokio::test]
async fn a_postgres_store_starting_beside_an_open_transaction_neither_waits_nor_blocks() {
    // A handler's `Tx` holds the inbox; a process starting now must not
    // queue a change of the tables behind it (which would make every
    // statement on the inbox wait behind that change).
    let store = stores::postgres().await;
    let consumer = unique("beside");
    let _cleanup = PgCleanup {
        consumers: vec![consumer.clone()],
    };
    let open = held(claim(&store, &consumer, "open").await);
    // Well under the 5 s a change of the tables waits for its lock.
    let started = tokio::time::timeout(Duration::from_secs(3), stores::postgres()).await;
    let other = started.expect("a store starting beside an open transaction waited for it");
    let count = tokio::time::timeout(
        Duration::from_secs(3),
        sqlx::query_as::<_, (i64,)>(
            "SELECT count(*) FROM rabbit_backoff_inbox WHERE consumer = $1",
        )
        .bind(&consumer)
        .fetch_one(other.pool()),
    )
    .await
    .expect("a read of the inbox waited behind a change of the tables")
    .unwrap();
    assert_eq!(count.0, 0, "the open claim is not committed yet");
    open.complete().await.unwrap();
}

#[tokio::test]
async fn postgres_counts_the_window_from_a_completion_that_comes_late() {
    // A claim already writes the end of its key's window (so that a prompt
    // completion changes no index); a handler that takes longer moves it.
    let store = stores::postgres().await;
    let consumer = unique("late");
    let _cleanup = PgCleanup {
        consumers: vec![consumer.clone()],
    };
    let window = Duration::from_secs(1);
    let claimed = held(lease_claim(&store, &consumer, "k", window).await);
    tokio::time::sleep(Duration::from_millis(600)).await;
    claimed.complete().await.unwrap();
    // 1.2 s after the claim, 0.6 s after the completion: still a duplicate.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(matches!(
        lease_claim(&store, &consumer, "k", window).await,
        Claim::Duplicate
    ));
    tokio::time::sleep(Duration::from_millis(700)).await;
    let again = held(lease_claim(&store, &consumer, "k", window).await);
    again.release().await.unwrap();
}

#[tokio::test]
async fn a_redis_claim_is_renewed_while_held_and_lapses_when_its_holder_is_gone() {
    let store = stores::redis().await.with_lease(Duration::from_millis(600));
    let consumer = unique("lease");
    let first = held(claim(&store, &consumer, "k").await);
    // Held past its lease: the holder renews it.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(matches!(
        claim(&store, &consumer, "k").await,
        Claim::InProgress
    ));
    first.complete().await.unwrap();

    // A holder whose process died (no renewal, no release): free once its
    // lease has run out. Another store's claim stands for it, its renewal
    // stopped by dropping that store's runtime (where its tasks run).
    let consumer2 = consumer.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let other = stores::redis().await.with_lease(Duration::from_millis(600));
            let held = held(claim(&other, &consumer2, "dead").await);
            std::mem::forget(held);
        });
    })
    .join()
    .unwrap();
    assert!(matches!(
        claim(&store, &consumer, "dead").await,
        Claim::InProgress
    ));
    tokio::time::sleep(Duration::from_millis(900)).await;
    held(claim(&store, &consumer, "dead").await)
        .release()
        .await
        .unwrap();
}

#[tokio::test]
async fn postgres_commits_the_handlers_writes_with_the_key_and_rolls_them_back_on_release() {
    let store = stores::postgres().await;
    let consumer = unique("tx");
    let _cleanup = PgCleanup {
        consumers: vec![consumer.clone()],
    };
    let table = format!("effects_{}", &consumer.replace('.', "_"));
    sqlx::query(&format!("CREATE TABLE {table} (key text)"))
        .execute(store.pool())
        .await
        .unwrap();

    for (key, commit) in [("kept", true), ("rolled-back", false)] {
        let held = held(claim(&store, &consumer, key).await);
        let tx = held
            .transaction()
            .expect("a PostgreSQL claim has a transaction");
        sqlx::query(&format!("INSERT INTO {table} VALUES ($1)"))
            .bind(key)
            .execute(&mut *tx.tx().conn().await.unwrap())
            .await
            .unwrap();
        drop(tx);
        if commit {
            held.complete().await.unwrap();
        } else {
            held.release().await.unwrap();
        }
    }
    let rows: Vec<(String,)> = sqlx::query_as(&format!("SELECT key FROM {table}"))
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(rows, vec![("kept".to_owned(),)]);
    assert!(matches!(
        claim(&store, &consumer, "kept").await,
        Claim::Duplicate
    ));
    held(claim(&store, &consumer, "rolled-back").await)
        .release()
        .await
        .unwrap();
    sqlx::query(&format!("DROP TABLE {table}"))
        .execute(store.pool())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_store_that_does_not_answer_says_so() {
    let port = stores::closed_port();
    let pg = PostgresStore::connect(&format!("postgres://postgres@127.0.0.1:{port}/test"))
        .await
        .expect("the service starts while PostgreSQL is down");
    let redis = RedisStore::connect(&format!("redis://127.0.0.1:{port}"))
        .await
        .expect("the service starts while Redis is down");
    for store in [&pg as &dyn DedupeStore, &redis] {
        let error = store
            .claim(request("c", "k", Duration::from_secs(60)))
            .await
            .expect_err("no claim without the store");
        assert!(
            matches!(&error, StoreError::Unavailable { store, .. } if store.contains(&port.to_string())),
            "{error}"
        );
        assert!(store.ping().await.is_err());
    }
    assert!(matches!(
        PostgresStore::connect("postgres://127.0.0.1:port/test").await,
        Err(StoreError::Address { .. })
    ));
    assert!(matches!(
        RedisStore::connect("redis://127.0.0.1:port").await,
        Err(StoreError::Address { .. })
    ));
}

#[tokio::test]
async fn postgres_deletes_expired_keys_in_bounded_batches_as_it_claims() {
    let store = stores::postgres().await.with_cleanup_every(6);
    let consumer = unique("cleanup");
    let sweeps = stores::postgres().await.with_cleanup_every(1);
    let _cleanup = PgCleanup {
        consumers: vec![consumer.clone()],
    };
    let window = Duration::from_millis(500);
    for n in 0..4 {
        let key = format!("old-{n}");
        let claimed = store.claim(request(&consumer, &key, window)).await.unwrap();
        held(claimed).complete().await.unwrap();
    }
    let rows = || async {
        let (n,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM rabbit_backoff_inbox WHERE consumer = $1")
                .bind(&consumer)
                .fetch_one(store.pool())
                .await
                .unwrap();
        n
    };
    // A claim whose handler runs longer than its key's window: past the
    // window, its lease still holds it.
    let long = held(lease_claim(&store, &consumer, "long", window).await);
    assert_eq!(rows().await, 5);
    tokio::time::sleep(Duration::from_millis(800)).await;
    // The sixth claim sweeps, in the background: the four expired rows go
    // (once the expired rows of others before them have gone: a sweep takes
    // the 2000 oldest, and other tests share the table), the held one and
    // its own (in its open transaction) stay.
    let fifth = held(
        store
            .claim(request(&consumer, "new", Duration::from_secs(60)))
            .await
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut more = 0;
    while rows().await > 1 {
        assert!(std::time::Instant::now() < deadline, "expired keys left");
        tokio::time::sleep(Duration::from_millis(50)).await;
        more += 1;
        let key = format!("sweep-{more}");
        held(
            sweeps
                .claim(request(&consumer, &key, window))
                .await
                .unwrap(),
        )
        .release()
        .await
        .unwrap();
    }
    assert!(
        matches!(
            lease_claim(&store, &consumer, "long", window).await,
            Claim::InProgress
        ),
        "a held key outliving its window is neither swept nor claimed twice"
    );
    long.complete().await.unwrap();
    fifth.complete().await.unwrap();
    assert_eq!(rows().await, 2);
}
