use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("unavailable")]
    Unavailable,
}

// Classic queues hold nothing back.
#[backoff_consumer(queue = "orders", delays = "exponential(1s, x2, 5)", queue_type = "classic", retry = "scheduled")]
async fn process_order(_order: String) -> Result<(), OrderError> {
    Ok(())
}

// Five retries, each a failed delivery: a limit of 5 dead-letters the last.
#[backoff_consumer(queue = "payments", delays = "exponential(1s, x2, 5)", queue_type = "quorum", delivery_limit = 5, retry = "scheduled")]
async fn process_payment(_payment: String) -> Result<(), OrderError> {
    Ok(())
}

// No retry queue to name.
#[backoff_consumer(queue = "refunds", delays = "5s,15s", queue_type = "quorum", retry_queue = "refunds.wait_{ms}", retry = "scheduled")]
async fn process_refund(_refund: String) -> Result<(), OrderError> {
    Ok(())
}

fn main() {}
