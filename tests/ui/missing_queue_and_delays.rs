use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("unavailable")]
    Unavailable,
}

#[backoff_consumer(prefetch = 5)]
async fn process_order(_order: String) -> Result<(), OrderError> {
    Ok(())
}

fn main() {}
