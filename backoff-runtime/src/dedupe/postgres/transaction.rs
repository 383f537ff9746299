//! The store's transaction as a handler parameter: `tx: Tx<'_>`.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use rabbit_backoff_core::outbox_message_id;
use sqlx::{PgConnection, Postgres};
use tokio::sync::MappedMutexGuard;

use crate::dedupe::postgres::outbox;
use crate::publish::outgoing::Outgoing;

/// The transaction of one delivery's claim in a `PostgresStore`: the inbox
/// row, the handler's writes and its outbox messages commit together.
pub struct Transaction {
    pub(crate) connection: tokio::sync::Mutex<Option<sqlx::Transaction<'static, Postgres>>>,
    /// The delivery's inbox key, which outbox message ids derive from.
    pub(crate) key: String,
    /// The outbox rows written in the current attempt.
    pub(crate) outbox: Mutex<Vec<i64>>,
    /// Whether the handler's writes began after [`ATTEMPT`]: set on its
    /// first use of the connection, so that a failure rolls back its writes
    /// and keeps the claim.
    pub(crate) savepoint: AtomicBool,
}

/// The savepoint the handler's writes follow.
pub(crate) const ATTEMPT: &str = "rabbit_backoff_attempt";

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Transaction {
    pub(crate) fn new(transaction: sqlx::Transaction<'static, Postgres>, key: String) -> Self {
        Transaction {
            connection: tokio::sync::Mutex::new(Some(transaction)),
            key,
            outbox: Mutex::new(Vec::new()),
            savepoint: AtomicBool::new(false),
        }
    }

    /// The transaction, taken to commit or roll it back.
    pub(crate) async fn take(&self) -> Option<sqlx::Transaction<'static, Postgres>> {
        self.connection.lock().await.take()
    }

    /// The transaction as a handler takes it.
    pub fn tx(&self) -> Tx<'_> {
        Tx { transaction: self }
    }

    pub(crate) fn outbox(&self) -> std::sync::MutexGuard<'_, Vec<i64>> {
        crate::dedupe::lock(&self.outbox)
    }
}

/// A handler parameter: the transaction its delivery's inbox row is written
/// in (a consumer with `dedupe` on a `PostgresStore`). What the handler
/// writes through it commits with the row, after the handler returned `Ok`,
/// and before the delivery is acknowledged; an error rolls it all back.
/// Messages it publishes through [`publish`](Tx::publish) are stored in the
/// same transaction and sent after the commit.
///
/// ```no_run
/// use rabbit_backoff::dedupe::{Tx, sqlx};
///
/// async fn charge(payment_id: i64, tx: Tx<'_>) -> Result<(), sqlx::Error> {
///     sqlx::query("INSERT INTO charges (payment_id) VALUES ($1)")
///         .bind(payment_id)
///         .execute(&mut *tx.conn().await?)
///         .await?;
///     Ok(())
/// }
/// ```
#[derive(Clone, Copy)]
pub struct Tx<'a> {
    transaction: &'a Transaction,
}

/// The connection of a [`Tx`], locked for one query or more: use it as
/// `&mut *conn` wherever sqlx takes an executor.
pub struct TxConnection<'a>(MappedMutexGuard<'a, sqlx::Transaction<'static, Postgres>>);

impl Deref for TxConnection<'_> {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        &self.0
    }
}

impl DerefMut for TxConnection<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.0
    }
}

impl Tx<'_> {
    /// The transaction's connection.
    pub async fn conn(&self) -> Result<TxConnection<'_>, sqlx::Error> {
        let guard = self.transaction.connection.lock().await;
        let mut conn = tokio::sync::MutexGuard::try_map(guard, Option::as_mut)
            .map(TxConnection)
            .map_err(|_| sqlx::Error::Protocol("the delivery's transaction is over".into()))?;
        if !self.transaction.savepoint.load(Ordering::Acquire) {
            sqlx::query(&format!("SAVEPOINT {ATTEMPT}"))
                .execute(&mut *conn)
                .await?;
            self.transaction.savepoint.store(true, Ordering::Release);
        }
        Ok(conn)
    }

    /// Stores `message` in the outbox, in this transaction: it is published
    /// to `exchange` with `routing_key` (with a confirm) once the transaction
    /// committed, and never when it rolls back. Its `message_id`, unless set,
    /// is the incoming delivery's inbox key and the message's position, the
    /// same on every run of the delivery (`order-7/1`, `order-7/2`), so that
    /// a receiver with `dedupe` drops a copy sent twice. Returns that id.
    pub async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        message: Outgoing,
    ) -> Result<String, sqlx::Error> {
        let mut conn = self.conn().await?;
        let position = u32::try_from(self.transaction.outbox().len() + 1).unwrap_or(u32::MAX);
        let message_id = match &message.message_id {
            Some(id) => id.clone(),
            None => outbox_message_id(&self.transaction.key, position),
        };
        let id = outbox::insert(&mut conn, exchange, routing_key, &message_id, &message).await?;
        self.transaction.outbox().push(id);
        Ok(message_id)
    }
}
