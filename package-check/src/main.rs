//! The README's service: its `main`, logging at `warn` unless `RUST_LOG`
//! says otherwise. `ORDERS_QUEUE` names the queue (the tests' own).

use package_check::{Db, process_order};
use rabbit_backoff::prelude::*;

#[tokio::main]
async fn main() -> Result<(), rabbit_backoff::Error> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt().with_env_filter(filter).init();   // RUST_LOG, else warn
    let queue = std::env::var("ORDERS_QUEUE").ok();
    Runtime::builder()
        .uri(rabbit_backoff::amqp_url_from_env())
        .state(Db::default())
        .consumer_with(process_order, |spec| {
            if let Some(queue) = queue {
                spec.queue = queue;
            }
        })
        .run()
        .await
}
