//! Queue depths as the broker has them now. The management API lists which
//! queues exist, but its counts lag by up to its sampling interval (5 s):
//! right after a replay it still shows the old depths. So the console asks
//! the broker itself (a passive declare per queue), whose count is exact
//! but covers ready messages only. While a queue has consumers, some of its
//! messages may be held unacknowledged (a pass over a dead-letter queue
//! holds all of them), so there the larger of that count and the management
//! API's (ready and unacknowledged) is shown; and while this console's own
//! pass holds a dead-letter queue, the count it had just before.

use std::collections::HashMap;
use std::sync::Arc;

use rabbit_backoff_runtime::transport::Connection;

use rabbit_backoff_dead_letters::discovery::{DiscoveredConsumer, QueueDepth};

/// The last exact counts (read while a queue had no consumer), by queue.
#[derive(Debug, Default)]
pub(crate) struct Remembered(std::sync::Mutex<HashMap<String, u64>>);

/// Puts the broker's current counts into every depth of `consumer`;
/// `passing` says that this console's own pass holds its dead-letter queue.
pub(crate) async fn refresh(
    connection: &Arc<dyn Connection>,
    consumer: &mut DiscoveredConsumer,
    remembered: &Remembered,
    passing: bool,
) -> Result<(), String> {
    refresh_one(connection, &mut consumer.work, remembered, false).await?;
    for tier in &mut consumer.tiers {
        refresh_one(connection, &mut tier.depth, remembered, false).await?;
    }
    refresh_one(connection, &mut consumer.dead_letter, remembered, passing).await
}

async fn refresh_one(
    connection: &Arc<dyn Connection>,
    depth: &mut QueueDepth,
    remembered: &Remembered,
    passing: bool,
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
            let mut exact = remembered.0.lock().unwrap_or_else(|e| e.into_inner());
            let before = passing.then(|| exact.get(&depth.name).copied()).flatten();
            *depth = current(depth, info.messages, info.consumers, before);
            if info.consumers == 0 {
                exact.insert(depth.name.clone(), depth.messages);
            }
            Ok(())
        }
        // Deleted since it was listed: the management API's figure stays.
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(format!("reading the depth of {}: {e}", depth.name)),
    }
}

/// The depth to show from the management API's `listed` one, the broker's
/// `ready` count and `consumers`, and the count before this console's own
/// pass when one holds the queue.
fn current(
    listed: &QueueDepth,
    ready: u32,
    consumers: u32,
    before_pass: Option<u64>,
) -> QueueDepth {
    let messages = match (consumers, before_pass) {
        (0, _) => u64::from(ready),
        (_, Some(before)) => before,
        _ => u64::from(ready).max(listed.messages),
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
        assert_eq!(current(&listed, 27, 0, None).messages, 27, "after a replay");
        assert_eq!(
            current(&listed, 0, 1, None).messages,
            30,
            "a pass holds them all"
        );
        assert_eq!(current(&listed, 40, 1, None).messages, 40);
        let lagging = QueueDepth {
            messages: 0,
            ..listed
        };
        assert_eq!(
            current(&lagging, 0, 1, Some(6)).messages,
            6,
            "the console's own pass holds them and the management API has not seen them yet"
        );
    }
}
