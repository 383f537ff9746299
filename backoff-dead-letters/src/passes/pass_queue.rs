//! The dead-letter queue as a pass reads it: its marker queue's name, how
//! many messages are ready, an acknowledgement, the id a sentinel or flag
//! carries. Shared by the pass and its rotation.

use lapin::types::AMQPValue;
use rabbit_backoff_core::headers::PASS_SENTINEL;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::channel_error;
use rabbit_backoff_runtime::transport::{Channel, Delivery, QueueInfo};

/// The marker queue of a dead-letter queue.
pub(crate) fn marker_queue(dead_letter_queue: &str) -> String {
    format!("{dead_letter_queue}.pass")
}

/// Whether a queue name is a pass's marker queue (not a consumer's queue).
pub fn is_marker_queue(name: &str) -> bool {
    name.ends_with(".pass")
}

/// Acknowledges `delivery`, read from `queue`.
pub(crate) async fn ack(delivery: &Delivery, queue: &str) -> Result<(), Error> {
    delivery
        .acker
        .ack()
        .await
        .map_err(channel_error(queue, "acknowledging a dead letter"))
}

/// The messages ready in `queue`.
pub(crate) async fn ready(channel: &dyn Channel, queue: &str) -> Result<usize, Error> {
    Ok(queue_info(channel, queue).await?.messages as usize)
}

/// The dead-letter queue's ready messages and consumers.
pub(crate) async fn queue_info(channel: &dyn Channel, queue: &str) -> Result<QueueInfo, Error> {
    channel
        .check_queue(queue)
        .await
        .map_err(channel_error(queue, "counting the dead-letter queue"))
}

/// The pass id of a sentinel or flag.
pub(crate) fn sentinel_of(delivery: &Delivery) -> Option<String> {
    match delivery
        .properties
        .headers()
        .as_ref()?
        .inner()
        .get(PASS_SENTINEL)?
    {
        AMQPValue::LongString(id) => Some(String::from_utf8_lossy(id.as_bytes()).into_owned()),
        _ => None,
    }
}
