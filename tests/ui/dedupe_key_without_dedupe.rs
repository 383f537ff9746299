use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error, Classify)]
enum PaymentError {
    #[error("unavailable")]
    Unavailable,
}

#[backoff_consumer(queue = "payments", delays = "1s", dedupe_key = "header:x-idempotency-key")]
async fn charge(_payment: String) -> Result<(), PaymentError> {
    Ok(())
}

fn main() {}
