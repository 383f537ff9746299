use rabbit_backoff::prelude::*;
use rabbit_backoff::{QueueType, RetryBackend};
use rabbit_backoff::topology::{Argument, Topology};

#[derive(Debug, thiserror::Error, Classify)]
pub enum OrderError {
    #[error("unavailable")]
    Unavailable,
}

#[backoff_consumer(
    queue = "orders",
    delays = "5s,10s,15s",
    queue_type = "quorum",
    retry = "delayed"
)]
pub async fn process_order(_order: String) -> Result<(), OrderError> {
    Ok(())
}

fn main() {
    let spec = process_order.spec();
    assert_eq!(spec.retry, RetryBackend::Delayed);
    assert_eq!(spec.queue_type, Some(QueueType::Quorum));
    spec.validate().expect("a linear ladder on a quorum queue");
    let topology = Topology::of(&spec);
    assert!(topology.retry_queues.is_empty());
    assert_eq!(
        topology.work_queue.argument("x-delayed-retry-min"),
        Some(&Argument::Int(5_000))
    );
    assert_eq!(
        topology.work_queue.argument("x-delayed-retry-max"),
        Some(&Argument::Int(15_000))
    );
}
