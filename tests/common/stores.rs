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
        rabbit_backoff_test_support::cleanup::apart(async move {
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
    }
}

/// A TCP proxy on a local port in front of a server, that can cut every
/// connection and refuse new ones (the server "goes down" for the clients
/// behind it) and come back on the same port, without touching the shared
/// server itself.
pub struct Proxy {
    pub port: u16,
    target: u16,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Proxy {
    pub async fn start(target: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut proxy = Proxy {
            port,
            target,
            task: None,
        };
        proxy.task = Some(tokio::spawn(Self::serve(listener, target)));
        proxy
    }

    async fn serve(listener: tokio::net::TcpListener, target: u16) {
        let mut links = tokio::task::JoinSet::new();
        while let Ok((mut client, _)) = listener.accept().await {
            links.spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    }

    /// Cuts every connection and refuses new ones.
    pub fn cut(&mut self) {
        if let Some(task) = self.task.take() {
            // Aborting the accept loop drops its JoinSet: every link closes.
            task.abort();
        }
    }

    /// Listens again on the same port.
    pub async fn restore(&mut self) {
        let mut tries = 0;
        let listener = loop {
            match tokio::net::TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(listener) => break listener,
                Err(e) if tries < 50 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => panic!("listening again on {}: {e}", self.port),
            }
        };
        self.task = Some(tokio::spawn(Self::serve(listener, self.target)));
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
    }
}
