//! One publish, confirmed: the only way the framework puts a message on the broker.

use std::future::Future;
use std::time::Duration;

use crate::error::PublishFailure;
use crate::transport::{Channel, Confirm, Publication};

/// Publishes with `mandatory` and awaits the broker's confirm of this very
/// message (not of every outstanding one), so concurrent publishes on one
/// channel pipeline. Ok only when the broker acked it and did not return it.
///
/// The publish starts when it is called; the future holds the transport's
/// own (the properties are in it), not a second copy of its arguments.
pub(crate) fn publish_confirmed<'a>(
    channel: &'a dyn Channel,
    message: Publication<'a>,
    timeout: Duration,
) -> impl Future<Output = Result<(), PublishFailure>> + Send + 'a {
    let published = channel.publish(message);
    async move {
        match tokio::time::timeout(timeout, published).await {
            Err(_) => Err(PublishFailure::Timeout(timeout)),
            Ok(Err(e)) => Err(PublishFailure::Channel(e)),
            Ok(Ok(Confirm::Ack)) => Ok(()),
            Ok(Ok(Confirm::Returned)) => Err(PublishFailure::Unroutable),
            Ok(Ok(Confirm::Nack)) => Err(PublishFailure::Nacked),
        }
    }
}
