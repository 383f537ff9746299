use rabbit_backoff::prelude::*;

mod other {
    /// Another crate's `State`: same name, not the framework's.
    pub struct State<T>(pub T);
}

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("unavailable")]
    Unavailable,
}

// Parameters are recognised by trait, not by name.
#[backoff_consumer(queue = "orders", delays = "5s")]
async fn process_order(_order: String, _db: other::State<u32>) -> Result<(), OrderError> {
    Ok(())
}

fn main() {}
