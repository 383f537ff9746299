//! Opening a confirm channel for work on one queue, with an error that names it.

use std::sync::Arc;

use crate::error::{Error, channel_error};
use crate::transport::{Channel, Connection};

/// A new channel in confirm mode; errors name `queue`.
pub(crate) async fn confirm_channel(
    connection: &dyn Connection,
    queue: &str,
) -> Result<Arc<dyn Channel>, Error> {
    connection
        .open_channel()
        .await
        .map_err(channel_error(queue, "opening a channel"))
}
