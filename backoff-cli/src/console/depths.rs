//! Queue depths as the broker has them now. The management API lists which
//! queues exist, but its counts lag by up to its sampling interval (5 s):
//! right after a replay it still shows the old depths. So the console asks
//! the broker itself (a passive declare per queue), whose count is exact
//! but covers ready messages only. While a queue has consumers, some of its
//! messages may be held unacknowledged (a pass over a dead-letter queue
//! holds all of them), so there the larger of that count and the management
//! API's (ready and unacknowledged) is shown.

use std::sync::Arc;

use rabbit_backoff_runtime::transport::Connection;

use crate::discovery::{DiscoveredConsumer, QueueDepth};

/// Puts the broker's current counts into every depth of `consumer`.
pub async fn refresh(
    connection: &Arc<dyn Connection>,
    consumer: &mut DiscoveredConsumer,
) -> Result<(), String> {
    refresh_one(connection, &mut consumer.work).await?;
    for tier in &mut consumer.tiers {
        refresh_one(connection, &mut tier.depth).await?;
    }
    refresh_one(connection, &mut consumer.dead_letter).await
}

async fn refresh_one(
    connection: &Arc<dyn Connection>,
    depth: &mut QueueDepth,
) -> Result<(), String> {
    // A channel of its own: a missing queue closes the channel it is asked on.
    let channel = connection
        .open_channel()
        .await
        .map_err(|e| format!("opening a channel to read {}: {e}", depth.name))?;
    let info = channel.check_queue(&depth.name).await;
    channel.close().await;
    match info {
        Ok(info) => {
            *depth = current(depth, info.messages, info.consumers);
            Ok(())
        }
        // Deleted since it was listed: the management API's figure stays.
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(format!("reading the depth of {}: {e}", depth.name)),
    }
}

/// The depth to show from the management API's `listed` one and the
/// broker's `ready` count and `consumers`.
fn current(listed: &QueueDepth, ready: u32, consumers: u32) -> QueueDepth {
    let messages = if consumers == 0 {
        u64::from(ready)
    } else {
        u64::from(ready).max(listed.messages)
    };
    QueueDepth {
        name: listed.name.clone(),
        messages,
        consumers: u64::from(consumers),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusts_the_broker_unless_someone_holds_messages() {
        let listed = QueueDepth {
            name: "orders.dlq".into(),
            messages: 30,
            consumers: 0,
        };
        assert_eq!(current(&listed, 27, 0).messages, 27, "after a replay");
        assert_eq!(current(&listed, 0, 1).messages, 30, "a pass holds them all");
        assert_eq!(current(&listed, 40, 1).messages, 40);
    }
}
