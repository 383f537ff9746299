//! The dedupe stores of the tests: the real PostgreSQL and Redis (started by
//! scripts/test.sh), and addresses where nothing answers.

use rabbit_backoff::dedupe::{PostgresStore, RedisStore};

pub fn postgres_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A local port where nothing listens (bound, then closed).
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

pub async fn postgres() -> PostgresStore {
    match PostgresStore::connect(&postgres_url()).await {
        Ok(store) => store,
        Err(e) => panic!(
            "PostgreSQL at {}: {e}. These tests need it: run scripts/test.sh, which starts it, or set DATABASE_URL.",
            postgres_url()
        ),
    }
}

pub async fn redis() -> RedisStore {
    RedisStore::connect(&redis_url())
        .await
        .unwrap_or_else(|e| panic!("Redis at {}: {e}", redis_url()))
}

/// Deletes a consumer's keys and outbox rows from PostgreSQL when dropped.
pub struct PgCleanup {
    pub consumers: Vec<String>,
}

impl Drop for PgCleanup {
    fn drop(&mut self) {
        let consumers = std::mem::take(&mut self.consumers);
        let url = postgres_url();
        let worker = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                use rabbit_backoff::dedupe::sqlx::Connection;
                let Ok(mut conn) = rabbit_backoff::dedupe::sqlx::PgConnection::connect(&url).await
                else {
                    return;
                };
                let _ = rabbit_backoff::dedupe::sqlx::query(
                    "DELETE FROM rabbit_backoff_inbox WHERE consumer = ANY($1)",
                )
                .bind(&consumers)
                .execute(&mut conn)
                .await;
            });
        });
        let _ = worker.join();
    }
}
