use rabbit_backoff::prelude::*;

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("unavailable")]
    Unavailable,
}

// One mistake in the attribute: one error, none where the value is used.
#[backoff_consumer(queue = "orders", delays = "5x")]
async fn process_order(order: String) -> Result<(), OrderError> {
    let _: &str = &order;
    Ok(())
}

fn main() {
    let _ = Runtime::builder().consumer(process_order);
}
