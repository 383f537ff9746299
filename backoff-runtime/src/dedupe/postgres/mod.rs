//! The inbox and the outbox on PostgreSQL. A claim is a transaction: it
//! takes an advisory lock on the key (released when the transaction ends,
//! also when its process dies) and writes the key's row, which the
//! handler's own writes join; the commit completes the key.

pub(crate) mod lease_batch;
pub(crate) mod outbox;
pub(crate) mod transaction;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres};
use tokio::sync::OnceCell;

use crate::dedupe::postgres::lease_batch::Batcher;
use crate::dedupe::postgres::transaction::ATTEMPT;
use crate::dedupe::store::{
    Claim, ClaimRequest, Completed, Counted, DedupeStore, HeldKey, OutboxChannel,
};
use crate::dedupe::{StoreError, Transaction};
use crate::transport::net::redact::redact;

/// The inbox table.
const INBOX: &str = "rabbit_backoff_inbox";
/// Connections of a store made by [`PostgresStore::connect`]: one per
/// delivery being handled.
const DEFAULT_POOL_SIZE: u32 = 20;
/// How long a claim waits for a free connection before the delivery is
/// requeued and the store reported unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// Every this many claims, one batch of expired keys is deleted.
const CLEANUP_EVERY: u64 = 1_000;
/// The most expired keys one cleanup deletes.
const CLEANUP_BATCH: i64 = 2_000;
/// The default interval of the outbox relay.
const DEFAULT_RELAY_INTERVAL: Duration = Duration::from_secs(1);

/// Creates or completes the tables, one process at a time, when
/// [`SCHEMA_CURRENT`] says they are not as this version needs them.
const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS rabbit_backoff_inbox (
        consumer text NOT NULL,
        key text NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (consumer, key)
    )",
    // The claim of a key whose handler does not take Tx (a lease); NULL
    // once completed.
    "ALTER TABLE rabbit_backoff_inbox ADD COLUMN IF NOT EXISTS token text",
    // When that claim lapses unless renewed: a column of its own, outside
    // every index, so that renewing and completing a claim are HOT updates
    // (no new index entries), which a page's spare tenth makes room for.
    "ALTER TABLE rabbit_backoff_inbox ADD COLUMN IF NOT EXISTS lease_until timestamptz",
    "ALTER TABLE rabbit_backoff_inbox SET (fillfactor = 90)",
    "CREATE INDEX IF NOT EXISTS rabbit_backoff_inbox_expires_at ON rabbit_backoff_inbox (expires_at)",
    "CREATE TABLE IF NOT EXISTS rabbit_backoff_outbox (
        id bigserial PRIMARY KEY,
        message_id text NOT NULL,
        exchange text NOT NULL,
        routing_key text NOT NULL,
        correlation_id text,
        headers bytea,
        body bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
    )",
];

/// PostgreSQL's `lock_not_available`: [`SCHEMA_LOCK_TIMEOUT`] ran out.
const LOCK_NOT_AVAILABLE: &str = "55P03";

/// Serializes the processes that change the tables.
const SCHEMA_LOCK: &str = "SELECT pg_advisory_xact_lock(7234014520715943231)";

/// How long a change of the tables waits for their lock: `ALTER TABLE`
/// waits for every open transaction on the inbox (a handler's `Tx`), and
/// every claim queues behind it meanwhile.
const SCHEMA_LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '5s'";

/// Whether the tables are already as [`SCHEMA`] makes them, read from the
/// catalog without locking them: a process that starts while handlers hold
/// transactions on the inbox must not queue an `ALTER TABLE` (which waits
/// for all of them, and makes every other statement on the table wait
/// behind it).
const SCHEMA_CURRENT: &str = "SELECT coalesce((
        SELECT 'fillfactor=90' = ANY(c.reloptions)
            AND to_regclass('rabbit_backoff_inbox_expires_at') IS NOT NULL
            AND to_regclass('rabbit_backoff_outbox') IS NOT NULL
            AND (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid
                AND a.attname IN ('token', 'lease_until') AND NOT a.attisdropped) = 2
        FROM pg_class c WHERE c.oid = to_regclass('rabbit_backoff_inbox')
    ), false)";

/// One round trip: try the key's advisory lock (held until the transaction
/// ends) and, when it was free, write the key's row unless a completed one
/// is still within its window. The lock makes the upsert wait for nobody
/// (every writer of the row holds it), and the upsert reads the newest
/// committed row, so a key completed a moment ago is seen.
const CLAIM: &str = concat!(
    "WITH lock AS (
        SELECT pg_try_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 0)) AS got
    ), claimed AS (
        INSERT INTO rabbit_backoff_inbox AS inbox (consumer, key, expires_at)
        SELECT $1, $2, now() + make_interval(secs => $3) FROM lock WHERE got
        ON CONFLICT (consumer, key) DO UPDATE
            SET expires_at = EXCLUDED.expires_at, token = NULL, lease_until = NULL
        WHERE ",
    inbox_row_is_free!(),
    "
        RETURNING 1
    )
    SELECT (SELECT got FROM lock), EXISTS (SELECT 1 FROM claimed)"
);

/// An inbox and a transactional outbox on PostgreSQL (feature `postgres`).
///
/// For a handler taking [`Tx`](crate::dedupe::Tx), a claim opens a
/// transaction on a pooled connection, takes the key's advisory lock and
/// writes its row (`rabbit_backoff_inbox`); the handler writes in that
/// transaction, and its outbox messages (`rabbit_backoff_outbox`) too. The commit, after the
/// handler succeeded and before the ack, makes the effects, the key and the
/// messages durable at once. A process that dies mid-handler loses its
/// connection, and PostgreSQL rolls the transaction back and frees the key
/// at once. For a handler that does not take `Tx`, a claim is the key's
/// row with a lease (15 s, renewed while the handler runs), and the claims,
/// completions and releases of concurrent deliveries are sent together, one
/// statement a batch. The tables are created on first use. Every 1000 claims one
/// batch of at most 2000 expired keys is deleted: no cron needed.
///
/// ```no_run
/// # async fn demo() -> Result<(), rabbit_backoff::dedupe::StoreError> {
/// use rabbit_backoff::dedupe::PostgresStore;
///
/// let store = PostgresStore::connect("postgres://postgres@127.0.0.1/test").await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    address: Arc<str>,
    schema: Arc<OnceCell<()>>,
    claims: Arc<AtomicU64>,
    relay_interval: Duration,
    dispatch: bool,
    /// Claims of handlers that do not take `Tx`, started on first use.
    batcher: Arc<std::sync::OnceLock<Arc<Batcher>>>,
    /// Every this many claims, one batch of expired keys is deleted.
    cleanup_every: u64,
}

impl PostgresStore {
    /// A store at `url` (`postgres://user:password@host:port/database`),
    /// with a pool of 20 connections. Only a malformed address, or a server
    /// that refuses to create the tables, is an error: when the server does
    /// not answer yet, the service starts, the runtime waits for it before
    /// consuming and says so in its health.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let address = redact(url);
        let options = PgConnectOptions::from_str(url).map_err(|e| StoreError::Address {
            address: address.clone(),
            reason: e.to_string(),
        })?;
        let pool = PgPoolOptions::new()
            .max_connections(DEFAULT_POOL_SIZE)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // A claim that finds its connection broken fails and its
            // delivery is requeued; no ping before every claim.
            .test_before_acquire(false)
            .connect_lazy_with(options);
        let store = Self::with_address(pool, address);
        match store.create_tables().await {
            Ok(()) => Ok(store),
            // The tables need a change (a new version's first start) and a
            // long transaction holds them: the first claim tries again.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(LOCK_NOT_AVAILABLE) => {
                tracing::warn!(
                    "the dedupe store at {} could not change its tables yet \
                     (a transaction holds them): {e}",
                    store.address
                );
                Ok(store)
            }
            // The server answered, and refused: a wrong database, user or right.
            Err(e @ sqlx::Error::Database(_)) => Err(store.failed("creating its tables")(e)),
            Err(e) => {
                tracing::warn!(
                    "the dedupe store at {} does not answer yet: {e}",
                    store.address
                );
                Ok(store)
            }
        }
    }

    /// A store on a pool of your own (its size bounds how many deliveries
    /// are handled at once: size it to the consumers' concurrency, and
    /// consider `test_before_acquire(false)`, which saves a round trip a
    /// delivery). The tables are created on first use.
    pub fn from_pool(pool: PgPool) -> Self {
        let options = pool.connect_options();
        let address = format!(
            "postgres://{}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("")
        );
        Self::with_address(pool, address)
    }

    fn with_address(pool: PgPool, address: String) -> Self {
        PostgresStore {
            pool,
            address: Arc::from(address),
            schema: Arc::new(OnceCell::new()),
            claims: Arc::new(AtomicU64::new(0)),
            relay_interval: DEFAULT_RELAY_INTERVAL,
            dispatch: true,
            batcher: Arc::default(),
            cleanup_every: CLEANUP_EVERY,
        }
    }

    /// How often every runtime's relay looks for outbox messages whose
    /// process died before it published them (default 1 s).
    pub fn with_relay_interval(mut self, interval: Duration) -> Self {
        self.relay_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// Leaves every outbox message to the relay instead of publishing it
    /// right after the commit: what a process that dies between the two
    /// leaves behind. For tests of the relay.
    #[doc(hidden)]
    pub fn without_dispatch(mut self) -> Self {
        self.dispatch = false;
        self
    }

    /// Deletes a batch of expired keys every `claims` claims instead of
    /// every 1000. For tests of the cleanup.
    #[doc(hidden)]
    pub fn with_cleanup_every(mut self, claims: u64) -> Self {
        self.cleanup_every = claims.max(1);
        self
    }

    /// The pool, for the application's own queries.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn failed(&self, action: &'static str) -> impl Fn(sqlx::Error) -> StoreError + '_ {
        move |e| StoreError::Unavailable {
            store: self.address.to_string(),
            action,
            reason: e.to_string(),
        }
    }

    /// Creates the tables, once per store.
    async fn schema(&self) -> Result<(), StoreError> {
        self.create_tables()
            .await
            .map_err(self.failed("creating its tables"))
    }

    async fn create_tables(&self) -> Result<(), sqlx::Error> {
        self.schema
            .get_or_try_init(|| async {
                let current = || sqlx::query_scalar::<_, bool>(SCHEMA_CURRENT);
                if current().fetch_one(&self.pool).await? {
                    return Ok(());
                }
                let mut tx = self.pool.begin().await?;
                sqlx::query(SCHEMA_LOCK).execute(&mut *tx).await?;
                // Another process may have done it while this one waited.
                if !current().fetch_one(&mut *tx).await? {
                    sqlx::query(SCHEMA_LOCK_TIMEOUT).execute(&mut *tx).await?;
                    for statement in SCHEMA {
                        sqlx::query(statement).execute(&mut *tx).await?;
                    }
                }
                tx.commit().await
            })
            .await
            .map(|_| ())
    }

    /// Deletes one bounded batch of expired keys, in the background: past
    /// their window, and not held (a claim outlives its key's window when
    /// its handler runs longer). The order makes the expiry index the plan,
    /// statistics or none: a scan of the table for expired keys would read
    /// it all when few are.
    fn clean_up(&self) {
        let (pool, address) = (self.pool.clone(), Arc::clone(&self.address));
        tokio::spawn(async move {
            let sql = format!(
                "DELETE FROM {INBOX} WHERE ctid = ANY(ARRAY(SELECT ctid FROM {INBOX} \
                 WHERE expires_at < now() \
                 AND (token IS NULL OR coalesce(lease_until, expires_at) < now()) \
                 ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED))"
            );
            match sqlx::query(&sql).bind(CLEANUP_BATCH).execute(&pool).await {
                Ok(done) => tracing::debug!("deleted {} expired keys", done.rows_affected()),
                Err(e) => tracing::warn!("deleting expired keys at {address}: {e}"),
            }
        });
    }

    /// Opens a transaction and claims the key in it: `None` when the lock
    /// was taken, `Some(false)` for a completed key, `Some(true)` claimed.
    async fn try_claim(
        &self,
        request: &ClaimRequest<'_>,
    ) -> Result<(sqlx::Transaction<'static, Postgres>, Option<bool>), StoreError> {
        self.schema().await?;
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(self.failed("opening a transaction"))?;
        let (got, claimed): (bool, bool) = sqlx::query_as(CLAIM)
            .bind(request.consumer)
            .bind(request.key)
            .bind(request.window.as_secs_f64())
            .fetch_one(&mut *tx)
            .await
            .map_err(self.failed("claiming a key"))?;
        Ok((tx, got.then_some(claimed)))
    }
}

impl DedupeStore for PostgresStore {
    fn claim<'a>(&'a self, request: ClaimRequest<'a>) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            let claims = self.claims.fetch_add(1, Ordering::Relaxed) + 1;
            if claims.is_multiple_of(self.cleanup_every) {
                self.clean_up();
            }
            if !request.transaction {
                self.schema().await?;
                let batcher = self
                    .batcher
                    .get_or_init(|| Batcher::start(self.pool.clone(), Arc::clone(&self.address)));
                return batcher
                    .claim(request.consumer, request.key, request.window)
                    .await;
            }
            let (tx, claimed) = self.try_claim(&request).await?;
            let not_ours = match claimed {
                None => Some(Claim::InProgress),
                Some(false) => Some(Claim::Duplicate),
                Some(true) => None,
            };
            if let Some(answer) = not_ours {
                // Ends it now, not when the pool next tests the connection:
                // a duplicate's transaction holds the key's lock.
                tx.rollback()
                    .await
                    .map_err(self.failed("ending a transaction"))?;
                return Ok(answer);
            }
            Ok(Claim::Claimed(Box::new(PostgresHeld {
                store: self.clone(),
                transaction: Arc::new(Transaction::new(tx, request.key.to_owned())),
            })))
        })
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            self.schema().await?;
            sqlx::query("SELECT 1")
                .execute(&self.pool)
                .await
                .map_err(self.failed("a ping"))?;
            Ok(())
        })
    }

    fn describe(&self) -> String {
        self.address.to_string()
    }

    fn transactional(&self) -> bool {
        true
    }

    fn dispatch<'a>(&'a self, ids: &'a [i64], to: OutboxChannel<'a>) -> Counted<'a> {
        Box::pin(async move {
            if !self.dispatch || ids.is_empty() {
                return Ok(0);
            }
            outbox::dispatch(&self.pool, ids, to.channel, to.confirm_timeout)
                .await
                .map_err(self.failed("dispatching outbox messages"))
        })
    }

    fn relay<'a>(&'a self, to: OutboxChannel<'a>) -> Counted<'a> {
        Box::pin(async move {
            self.schema().await?;
            outbox::relay(&self.pool, to.channel, to.confirm_timeout)
                .await
                .map_err(self.failed("relaying outbox messages"))
        })
    }

    fn relay_interval(&self) -> Option<Duration> {
        Some(self.relay_interval)
    }
}

struct PostgresHeld {
    store: PostgresStore,
    transaction: Arc<Transaction>,
}

impl PostgresHeld {
    /// Rolls the transaction back: the effects, the outbox rows and the
    /// claim go, and the key's lock is free.
    async fn roll_back(&self) -> Result<(), StoreError> {
        if let Some(tx) = self.transaction.take().await {
            tx.rollback()
                .await
                .map_err(self.store.failed("rolling back a transaction"))?;
        }
        Ok(())
    }
}

impl HeldKey for PostgresHeld {
    fn complete(self: Box<Self>) -> BoxFuture<'static, Result<Completed, StoreError>> {
        Box::pin(async move {
            let Some(tx) = self.transaction.take().await else {
                return Err(StoreError::Unavailable {
                    store: self.store.describe(),
                    action: "committing",
                    reason: "the transaction was already ended".into(),
                });
            };
            tx.commit()
                .await
                .map_err(self.store.failed("committing a transaction"))?;
            let outbox = std::mem::take(&mut *self.transaction.outbox());
            Ok(Completed { outbox })
        })
    }

    fn complete_failed(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        Box::pin(async move {
            // The handler's writes go; the key's row, written before them,
            // commits: the key stays locked throughout.
            self.restart_attempt().await?;
            let Some(tx) = self.transaction.take().await else {
                return Ok(());
            };
            tx.commit()
                .await
                .map_err(self.store.failed("recording a key"))
        })
    }

    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        Box::pin(async move { self.roll_back().await })
    }

    fn restart_attempt(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            self.transaction.outbox().clear();
            if !self.transaction.savepoint.load(Ordering::Acquire) {
                return Ok(());
            }
            let mut guard = self.transaction.connection.lock().await;
            if let Some(tx) = guard.as_mut() {
                sqlx::query(&format!("ROLLBACK TO SAVEPOINT {ATTEMPT}"))
                    .execute(&mut **tx)
                    .await
                    .map_err(self.store.failed("rolling back the handler's writes"))?;
            }
            Ok(())
        })
    }

    fn transaction(&self) -> Option<Arc<Transaction>> {
        Some(Arc::clone(&self.transaction))
    }
}
