//! Reading the dead-letter index instead of the dead-letter queue.
//!
//! The index is two streams beside the queue
//! ([`DeadLetterIndexDecl`](rabbit_backoff_core::DeadLetterIndexDecl)): the
//! broker writes every dead letter routed to the queue to `entries` as well,
//! and the operator tools write a tombstone to `removals` for each dead
//! letter they remove. Reading it takes none of the queue's messages, so it
//! costs the queue's process nothing.
//!
//! A read marks the end of both streams (a marker message, published
//! straight to each), reads the tombstones into a multiset of keys, then
//! reads the entries: an entry whose key has a tombstone left is cancelled
//! (one entry per tombstone, the earliest), every other is live and is
//! grouped as a pass groups it. Then the **count check**: the live entries
//! must be as many as the queue's ready messages, read before the markers
//! (and unchanged after them). When they are not, the index does not
//! describe the queue (its retention dropped entries; messages left the
//! queue without a tombstone, by a purge, a `basic.get`, a length limit or a
//! shovel; or reached it without the dead-letter exchange) and the caller
//! reads the queue instead.
//!
//! The blind spot: a removal without a tombstone and an arrival without an
//! entry that happen between two reads cancel out in the count, and the
//! index then shows the removed message's group instead of the arrived
//! one's, until either leaves the queue through a pass.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use rabbit_backoff_core::TopologyNames;
use rabbit_backoff_core::headers::INDEX_MARKER;

use crate::operations::dead_letter_filter::DeadLetterFilter;
use crate::operations::dead_letter_group::{DeadLetterGroup, GroupTally};
use crate::operations::dead_letter_key::key_of;
use crate::operations::dead_letter_message::DeadLetterMessage;
use crate::operations::dead_letter_pass::pass_id;
use crate::operations::dead_letter_tombstones::keys_in;
use crate::operations::index_fallback::IndexFallback;
use crate::transport::error::Error;
use crate::transport::inspect::inspect_queue;
use crate::transport::open::confirm_channel;
use crate::transport::{Channel, Confirm, Connection, Delivery, StreamOffset};

/// Deliveries a stream consumer of the index may hold unacknowledged.
const PREFETCH: u16 = 5000;

/// Deliveries acknowledged together (for a stream, an ack only asks for more).
const ACK_EVERY: usize = 1000;

/// How long a read waits for the next message before its end marker.
const IDLE: Duration = Duration::from_secs(30);

/// The header a broker adds to each message it delivers from a stream.
const STREAM_OFFSET: &str = "x-stream-offset";

/// The groups of the dead letters in the queue of `names` that match
/// `filter`, read from the index; why not, when it cannot be.
pub(crate) async fn index_groups(
    connection: &dyn Connection,
    names: &TopologyNames,
    filter: &DeadLetterFilter,
) -> Result<Vec<DeadLetterGroup>, IndexFallback> {
    if filter.limit.is_some() {
        return Err(IndexFallback::Limited);
    }
    let entries = names.dead_letter_index();
    let removals = names.dead_letter_index_removals();
    for stream in [&entries, &removals] {
        if inspect_queue(connection, stream)
            .await
            .map_err(unreadable)?
            .is_none()
        {
            return Err(IndexFallback::Absent);
        }
    }
    let queue = &names.dead_letter_queue;
    let before = depth(connection, queue).await?;
    let id = pass_id();
    let channel = confirm_channel(connection, &entries)
        .await
        .map_err(unreadable)?;
    let result = async {
        mark_end(&*channel, &removals, &id).await?;
        mark_end(&*channel, &entries, &id).await?;
        let after = depth(connection, queue).await?;
        if after != before {
            return Err(IndexFallback::Moving { before, after });
        }
        let mut removed: HashMap<u64, u32> = HashMap::new();
        read_to_marker(&*channel, &removals, &id, |delivery| {
            for key in keys_in(&delivery.data) {
                *removed.entry(key).or_default() += 1;
            }
        })
        .await?;
        let mut tally = GroupTally::default();
        let mut live = 0;
        read_to_marker(&*channel, &entries, &id, |delivery| {
            if let Some(left) = removed.get_mut(&key_of(&delivery.properties))
                && *left > 0
            {
                *left -= 1;
                return;
            }
            live += 1;
            let mut summary = DeadLetterMessage::of(delivery, live - 1);
            summary.headers.remove(STREAM_OFFSET);
            if filter.matches_with_body(&summary, &delivery.data) {
                tally.add(&summary);
            }
        })
        .await?;
        if live != before as usize {
            return Err(IndexFallback::CountMismatch {
                indexed: live,
                depth: before as usize,
            });
        }
        Ok(tally.into_groups())
    }
    .await;
    channel.close().await;
    result
}

fn unreadable(e: Error) -> IndexFallback {
    IndexFallback::Unreadable {
        reason: e.to_string(),
    }
}

/// The ready messages of the dead-letter queue.
async fn depth(connection: &dyn Connection, queue: &str) -> Result<u32, IndexFallback> {
    inspect_queue(connection, queue)
        .await
        .map_err(unreadable)?
        .map(|(messages, _)| messages)
        .ok_or_else(|| IndexFallback::Unreadable {
            reason: format!("the dead-letter queue '{queue}' is not there"),
        })
}

/// Publishes the end marker `id` straight to `stream`, confirmed.
async fn mark_end(channel: &dyn Channel, stream: &str, id: &str) -> Result<(), IndexFallback> {
    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from(INDEX_MARKER),
        AMQPValue::LongString(LongString::from(id.as_bytes())),
    );
    let confirm = channel
        .publish(
            "",
            stream,
            b"",
            BasicProperties::default().with_headers(headers),
        )
        .await
        .map_err(|e| IndexFallback::Unreadable {
            reason: format!("marking the end of '{stream}': {e}"),
        })?;
    match confirm {
        Confirm::Ack => Ok(()),
        Confirm::Returned => Err(IndexFallback::Absent),
        Confirm::Nack => Err(IndexFallback::Unreadable {
            reason: format!("'{stream}' did not take the end marker (Nack)"),
        }),
    }
}

/// Reads `stream` from its first message up to the marker `id`, calling
/// `each` with every message but the markers.
async fn read_to_marker(
    channel: &dyn Channel,
    stream: &str,
    id: &str,
    mut each: impl FnMut(&Delivery),
) -> Result<(), IndexFallback> {
    let failed = |what: &str, e: &dyn std::fmt::Display| IndexFallback::Unreadable {
        reason: format!("{what} '{stream}': {e}"),
    };
    channel
        .qos(PREFETCH)
        .await
        .map_err(|e| failed("setting the prefetch of", &e))?;
    let mut deliveries = channel
        .consume_stream(stream, StreamOffset::First)
        .await
        .map_err(|e| failed("reading", &e))?;
    let mut unacked = 0;
    loop {
        let delivery = match tokio::time::timeout(IDLE, deliveries.stream.next()).await {
            Err(_) => {
                return Err(IndexFallback::Unreadable {
                    reason: format!(
                        "nothing came from '{stream}' for {} s before its end",
                        IDLE.as_secs()
                    ),
                });
            }
            Ok(None) => return Err(failed("reading", &"the consumer was cancelled")),
            Ok(Some(Err(e))) => return Err(failed("reading", &e)),
            Ok(Some(Ok(delivery))) => delivery,
        };
        unacked += 1;
        let marker = marker_of(&delivery.properties);
        if unacked >= ACK_EVERY || marker.is_some() {
            delivery
                .acker
                .ack_multiple()
                .await
                .map_err(|e| failed("acknowledging", &e))?;
            unacked = 0;
        }
        match marker {
            Some(seen) if seen == id.as_bytes() => break,
            Some(_) => {}
            None => each(&delivery),
        }
    }
    let _ = channel.cancel(&deliveries.consumer_tag).await;
    Ok(())
}

/// The id of an end marker.
fn marker_of(properties: &BasicProperties) -> Option<&[u8]> {
    match properties.headers().as_ref()?.inner().get(INDEX_MARKER)? {
        AMQPValue::LongString(id) => Some(id.as_bytes()),
        AMQPValue::ShortString(id) => Some(id.as_str().as_bytes()),
        AMQPValue::ByteArray(id) => Some(id.as_slice()),
        _ => Some(b""),
    }
}
