//! The dedupe sides' stores (`dedupe=postgres`, `dedupe=redis`), and the
//! inbox rows of a run forgotten after it.

use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff::dedupe::{DedupeStore, PostgresStore, RedisStore, sqlx};

use crate::side::Side;

/// How long the dedupe sides remember a key: past the end of a run.
pub(crate) const DEDUPE_WINDOW: Duration = Duration::from_secs(600);

pub(crate) fn postgres_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The store of a dedupe side, its pool as large as the concurrency.
pub(crate) async fn dedupe_store(side: Side, prefetch: u16) -> Arc<dyn DedupeStore> {
    match side {
        Side::DedupePostgres => {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(u32::from(prefetch))
                .test_before_acquire(false)
                .connect(&postgres_url())
                .await
                .expect("PostgreSQL answers (scripts/bench.sh starts it)");
            Arc::new(PostgresStore::from_pool(pool))
        }
        _ => {
            let url =
                std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            Arc::new(RedisStore::connect(&url).await.expect("Redis address"))
        }
    }
}

/// Deletes the inbox rows of a run's consumer, and vacuums the table, so
/// that each run starts from the table a server with autovacuum (the
/// default) would have: without it, every run's dead rows stay in the heap
/// and the indexes, and each run is slower than the one before.
pub(crate) async fn forget_keys(consumer: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&postgres_url())
        .await
        .expect("PostgreSQL");
    sqlx::query("DELETE FROM rabbit_backoff_inbox WHERE consumer = $1")
        .bind(consumer)
        .execute(&mut conn)
        .await
        .expect("delete the run's keys");
    sqlx::query("VACUUM ANALYZE rabbit_backoff_inbox")
        .execute(&mut conn)
        .await
        .expect("vacuum the inbox");
}
