use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("unavailable")]
    Unavailable,
}

#[backoff_consumer(queue = "amq.x", delays = "5s,5s", prefetch = 0, colour = "red")]
async fn process_order(_order: String) -> Result<(), OrderError> {
    Ok(())
}

fn main() {}
