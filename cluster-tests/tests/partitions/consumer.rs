//! The consumer under the faults: the orders mix it is sent, and a handler
//! that writes one effect row per message through the delivery's
//! transaction (`dedupe` on PostgreSQL), recording every call.

use std::sync::{Arc, Mutex};

use rabbit_backoff::QueueType;
use rabbit_backoff::dedupe::{Tx, sqlx};
use rabbit_backoff::prelude::*;
use tokio::time::Instant;

use crate::common::{Fail, Job, Verdict, stores};
use crate::history::Expect;

/// What each id does: 2% fail permanently (dead-lettered), 5% fail once and
/// 3% twice before they succeed, the rest succeed at once (the orders mix).
pub(crate) fn mixed(id: u64) -> Job {
    match id % 100 {
        0 | 50 => Job::new(id, Fail::Permanent, None),
        1..=5 => Job::new(id, Fail::Transient, Some(1)),
        6..=8 => Job::new(id, Fail::Transient, Some(2)),
        _ => Job::new(id, Fail::None, None),
    }
}

pub(crate) fn expect(id: u64) -> Expect {
    match mixed(id).verdict(u32::MAX) {
        Verdict::Ok => Expect::Handled,
        _ => Expect::DeadLettered,
    }
}

/// Every handler call: id, retry count, when.
#[derive(Clone, Default)]
pub(crate) struct Calls(pub(crate) Arc<Mutex<Vec<(u64, u32, Instant)>>>);

/// The table the handler writes its effect rows to.
pub(crate) struct Effects {
    pub(crate) table: String,
}

#[derive(Debug, thiserror::Error, Classify)]
pub(crate) enum OrderError {
    #[error("dependency unavailable (order {0})")]
    Unavailable(u64),
    #[permanent]
    #[error("order {0} is invalid")]
    Invalid(u64),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// Writes one effect row through the delivery's transaction when the job
/// succeeds at this retry count; fails as the job says otherwise.
#[backoff_consumer(queue = "placeholder", delays = "1s,2s", dedupe = "24h")]
pub(crate) async fn place(
    job: Job,
    ctx: &Context,
    tx: Tx<'_>,
    effects: State<Effects>,
    calls: State<Calls>,
) -> Result<(), OrderError> {
    calls
        .0
        .lock()
        .unwrap()
        .push((job.id, ctx.retry_count(), Instant::now()));
    match job.verdict(ctx.retry_count()) {
        Verdict::Ok => {}
        Verdict::Transient => return Err(OrderError::Unavailable(job.id)),
        Verdict::Permanent => return Err(OrderError::Invalid(job.id)),
    }
    sqlx::query(&format!("INSERT INTO {} (id) VALUES ($1)", effects.table))
        .bind(job.id as i64)
        .execute(&mut *tx.conn().await?)
        .await?;
    Ok(())
}

pub(crate) fn queue_type() -> QueueType {
    match std::env::var("PARTITION_QUEUE_TYPE").as_deref() {
        Err(_) | Ok("quorum") => QueueType::Quorum,
        Ok("classic") => QueueType::Classic,
        Ok(other) => panic!("PARTITION_QUEUE_TYPE is quorum or classic, not {other:?}"),
    }
}

pub(crate) fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// Drops the effect table when dropped.
pub(crate) struct DropTable(pub(crate) String);

impl Drop for DropTable {
    fn drop(&mut self) {
        let table = std::mem::take(&mut self.0);
        let url = stores::postgres_url();
        rabbit_backoff_test_support::cleanup::apart(async move {
            use sqlx::Connection;
            if let Ok(mut conn) = sqlx::PgConnection::connect(&url).await {
                let _ = sqlx::query(&format!("DROP TABLE IF EXISTS {table}"))
                    .execute(&mut conn)
                    .await;
            }
        });
    }
}
