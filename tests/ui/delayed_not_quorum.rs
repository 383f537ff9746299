use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("unavailable")]
    Unavailable,
}

#[backoff_consumer(queue = "orders", delays = "5s,10s", queue_type = "classic", retry = "delayed")]
async fn process_order(_order: String) -> Result<(), OrderError> {
    Ok(())
}

fn main() {}
