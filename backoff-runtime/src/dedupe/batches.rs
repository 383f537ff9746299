//! Sending the store operations of concurrent deliveries together: the loop
//! that gathers what waits into one batch, shared by the PostgreSQL batcher
//! and the Redis pipeline.

use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc};

/// The most operations one batch carries.
pub(crate) const BATCH: usize = 500;

/// Takes what waits and sends it as one batch, without waiting for the
/// batches before it to return (at most `in_flight` at once): a free slot
/// first, then everything that waits, so that while every slot is busy the
/// next batch grows. Ends when every sender is gone.
pub(crate) async fn run<T, F, Sent>(
    mut receiver: mpsc::UnboundedReceiver<T>,
    in_flight: usize,
    send: F,
) where
    T: Send + 'static,
    F: Fn(Vec<T>) -> Sent,
    Sent: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(in_flight));
    let mut ops = Vec::new();
    loop {
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        if receiver.recv_many(&mut ops, BATCH).await == 0 {
            return;
        }
        let sent = send(std::mem::take(&mut ops));
        tokio::spawn(async move {
            sent.await;
            drop(permit);
        });
    }
}
