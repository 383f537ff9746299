use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("unavailable")]
    Unavailable,
}

#[backoff_consumer(queue = "orders", delays = "1s,2s,3s", queue_type = "quorum", delivery_limit = 3, retry = "delayed")]
async fn process_order(_order: String) -> Result<(), OrderError> {
    Ok(())
}

fn main() {}
