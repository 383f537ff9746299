use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error, Classify)]
enum PaymentError {
    #[error("unavailable")]
    Unavailable,
}

#[backoff_consumer(queue = "payments", delays = "1s", dedupe = "24h", dedupe_key = "x-idempotency-key")]
async fn charge(_payment: String) -> Result<(), PaymentError> {
    Ok(())
}

#[backoff_consumer(queue = "refunds", delays = "1s", dedupe = "1d")]
async fn refund(_payment: String) -> Result<(), PaymentError> {
    Ok(())
}

fn main() {}
