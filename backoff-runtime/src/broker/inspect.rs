//! Looking at the broker's objects without changing them: a passive declare
//! each, on a channel of its own, because a missing object closes the
//! channel it is asked on.

use super::confirm_channel::confirm_channel;
use crate::error::Error;
use crate::transport::Connection;

/// The ready messages and consumers of `name`, or `None` when it does not
/// exist. A passive declare, on a channel of its own because a missing queue
/// closes the channel it is asked on.
pub(crate) async fn inspect_queue(
    connection: &dyn Connection,
    name: &str,
) -> Result<Option<(u32, u32)>, Error> {
    let channel = confirm_channel(connection, name).await?;
    match channel.check_queue(name).await {
        Ok(queue) => {
            channel.close().await;
            Ok(Some((queue.messages, queue.consumers)))
        }
        Err(e) if e.is_not_found() => Ok(None),
        Err(source) => Err(Error::Channel {
            action: "checking that the queue exists",
            queue: name.to_owned(),
            source,
        }),
    }
}

/// Whether the exchange `name` exists: a passive declare, on a channel of its
/// own as in [`inspect_queue`].
pub(crate) async fn exchange_exists(
    connection: &dyn Connection,
    name: &str,
) -> Result<bool, Error> {
    let channel = confirm_channel(connection, name).await?;
    match channel.check_exchange(name).await {
        Ok(()) => {
            channel.close().await;
            Ok(true)
        }
        Err(e) if e.is_not_found() => Ok(false),
        Err(source) => Err(Error::Channel {
            action: "checking that the exchange exists",
            queue: name.to_owned(),
            source,
        }),
    }
}
