//! The outbox relay: publishes outbox messages that the process which
//! committed them did not (it died between its commit and their dispatch).

use std::sync::Arc;
use std::time::Duration;

use crate::broker::confirm_channel::confirm_channel;
use crate::consume::shutdown::ShutdownHandle;
use crate::dedupe::{DedupeStore, OutboxChannel};
use crate::transport::Connection;

/// Relays at once, then every `interval`, on a channel of its own, until
/// `stop`. Every running process relays: rows are locked while published,
/// so two relays never publish the same row at once.
pub(crate) async fn relay_outbox(
    store: Arc<dyn DedupeStore>,
    connection: Arc<dyn Connection>,
    interval: Duration,
    confirm_timeout: Duration,
    stop: ShutdownHandle,
) {
    let mut channel = None;
    loop {
        if channel.is_none() {
            channel = confirm_channel(&*connection, "(outbox relay)").await.ok();
        }
        if let Some(open) = &channel {
            match store
                .relay(OutboxChannel::new(&**open, confirm_timeout))
                .await
            {
                Ok(0) => {}
                Ok(sent) => tracing::info!(
                    "outbox relay: published {sent} messages left by a stopped process"
                ),
                Err(e) => {
                    tracing::warn!("outbox relay: {e}");
                    // A refused publish closes the channel: open another next round.
                    channel = None;
                }
            }
        }
        tokio::select! {
            _ = stop.wait() => break,
            _ = tokio::time::sleep(interval) => {}
        }
    }
    if let Some(channel) = channel {
        channel.close().await;
    }
}
