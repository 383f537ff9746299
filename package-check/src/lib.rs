//! The README's "In a service" consumer, as a service writes it against the
//! published crate.

use std::sync::Mutex;

use rabbit_backoff::prelude::*;

/// An order, as the producer publishes it.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
pub struct Order {
    /// Its id.
    pub id: u64,
}

/// Why an order could not be stored.
#[derive(Debug, thiserror::Error, Classify)]
pub enum OrderError {
    /// Transient: retried after each tier.
    #[error("database unavailable")]
    Unavailable,
    /// Permanent: dead-lettered at once.
    #[permanent]
    #[error("invalid order: {0}")]
    Invalid(String),
}

/// The service's database: here the ids it stored.
#[derive(Default)]
pub struct Db {
    /// Every stored id, in order.
    pub stored: Mutex<Vec<u64>>,
}

impl Db {
    async fn store(&self, id: u64) -> Result<(), OrderError> {
        if id == 0 {
            return Err(OrderError::Invalid("id 0".into()));
        }
        self.stored
            .lock()
            .map_err(|_| OrderError::Unavailable)?
            .push(id);
        Ok(())
    }
}

/// Stores an order.
#[backoff_consumer(queue = "orders", delays = "5s,15s,60s")]
pub async fn process_order(order: Order, ctx: &Context, db: State<Db>) -> Result<(), OrderError> {
    let _ = (ctx.message_id(), ctx.attempt());
    db.store(order.id).await
}

/// An error from "another crate", classified by hand: `Classify::verdict`.
#[derive(Debug)]
pub enum ForeignError {
    /// A rate limit: retried no sooner than asked.
    RateLimited(std::time::Duration),
    /// Nothing to do any more: acked and dropped.
    Obsolete,
    /// Anything else: retried.
    Other,
}

impl std::fmt::Display for ForeignError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl Classify for ForeignError {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }

    fn verdict(&self) -> rabbit_backoff::rules::Verdict {
        match self {
            ForeignError::RateLimited(wait) => rabbit_backoff::rules::Verdict::RetryAfter(*wait),
            ForeignError::Obsolete => rabbit_backoff::rules::Verdict::Discard,
            ForeignError::Other => rabbit_backoff::rules::Verdict::Retry,
        }
    }
}
