//! Dropping duplicate deliveries (the inbox) and publishing with the
//! handler's effects (the transactional outbox): the stores that remember
//! which keys were handled, and the outbox rows and their dispatch.
//!
//! A consumer with `dedupe = "24h"` claims each delivery's key in the
//! runtime's [`DedupeStore`] before its handler runs:
//! - a key completed within the window is acknowledged without the handler;
//! - a key another delivery holds right now is requeued after a pause;
//! - otherwise the handler runs, and the key is completed (handled,
//!   dead-lettered, discarded) or released (a transient failure, whose retry
//!   runs again).
//!
//! Three stores: [`MemoryStore`] (one process, tokio's clock),
//! `RedisStore` (feature `redis`) and `PostgresStore` (feature `postgres`),
//! whose transaction a handler can write in through `Tx` (feature `postgres`),
//! with the messages it publishes through the outbox.

/// Whether the inbox row `inbox` may be claimed, in SQL: a completed key
/// (no token) once its window is over, a held one once its lease is (a row
/// written before the lease had a column of its own keeps it in
/// `expires_at`).
#[cfg(feature = "postgres")]
macro_rules! inbox_row_is_free {
    () => {
        "(CASE WHEN inbox.token IS NULL THEN inbox.expires_at <= now() \
         ELSE coalesce(inbox.lease_until, inbox.expires_at) <= now() END)"
    };
}

#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) mod batches;
pub(crate) mod memory;
pub(crate) mod plain_held;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "redis")]
pub(crate) mod redis;
pub(crate) mod store;

pub use crate::store_error::StoreError;
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(feature = "postgres")]
pub use postgres::transaction::{Transaction, Tx, TxConnection};
#[cfg(feature = "redis")]
pub use redis::RedisStore;
pub use store::{Claim, ClaimRequest, Completed, Counted, DedupeStore, HeldKey, OutboxChannel};

/// Locks `mutex`, and goes on with what it holds if a holder panicked: the
/// stores' maps stay usable (a claim held by a panicked task lapses or is
/// released like any other).
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The PostgreSQL client the store and [`Tx`] use, re-exported so that a
/// handler's queries use the same version.
#[cfg(feature = "postgres")]
pub use sqlx;
