use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("unavailable")]
    Unavailable,
}

#[backoff_consumer(queue = "orders", delays = "1s,2s", queue_type = "quorum", retry = "delayed", jitter = "20%", max_age = "1h", retry_queue = "orders.wait_{ms}")]
async fn process_order(_order: String) -> Result<(), OrderError> {
    Ok(())
}

fn main() {}
