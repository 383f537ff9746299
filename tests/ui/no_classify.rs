use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error)]
#[error("plain")]
struct PlainError;

#[backoff_consumer(queue = "orders", delays = "5s")]
async fn process_order(_order: String) -> Result<(), PlainError> {
    Ok(())
}

fn main() {}
