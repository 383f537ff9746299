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
//! After a [checkpoint](crate::operations::index_checkpoint), the read
//! starts from it: its groups, the tombstones written after it, and the
//! entries after its offset; a tombstone that cancels no such entry comes
//! out of the checkpoint's group it names.
//!
//! The blind spot: a removal without a tombstone and an arrival without an
//! entry that happen between two reads cancel out in the count, and the
//! index then shows the removed message's group instead of the arrived
//! one's, until either leaves the queue through a pass.

use std::collections::HashMap;

use rabbit_backoff_core::TopologyNames;

use crate::operations::dead_letter_filter::DeadLetterFilter;
use crate::operations::dead_letter_group::{DeadLetterGroup, GroupTally};
use crate::operations::dead_letter_key::key_of;
use crate::operations::dead_letter_message::DeadLetterMessage;
use crate::operations::dead_letter_pass::pass_id;
use crate::operations::dead_letter_tombstones::{group_of_number, removals_in};
use crate::operations::index_checkpoint::{Checkpoint, Parts, is_part};
use crate::operations::index_fallback::IndexFallback;
use crate::operations::index_stream::{STREAM_OFFSET, mark_end, read_to_marker, unreadable};
use crate::transport::Connection;
use crate::transport::error::Error;
use crate::transport::inspect::inspect_queue;
use crate::transport::open::confirm_channel;

/// The groups an index read found, and where it started.
#[derive(Debug)]
pub(crate) struct IndexRead {
    /// The groups, largest first.
    pub(crate) groups: Vec<DeadLetterGroup>,
    /// The entries' offset of the checkpoint it started from, if any.
    pub(crate) checkpoint: Option<u64>,
}

/// Removals of one key since the checkpoint: how many, and their group
/// (none in tombstones written before groups were).
#[derive(Debug, Default, Clone, Copy)]
struct Removed {
    left: u32,
    group: Option<u64>,
}

/// The groups of the dead letters in the queue of `names` that match
/// `filter`, read from the index; why not, when it cannot be.
pub(crate) async fn index_groups(
    connection: &dyn Connection,
    names: &TopologyNames,
    filter: &DeadLetterFilter,
) -> Result<IndexRead, IndexFallback> {
    if filter.limit.is_some() {
        return Err(IndexFallback::Limited);
    }
    let entries = names.dead_letter_index();
    let removals = names.dead_letter_index_removals();
    if !index_exists(connection, names).await.map_err(unreadable)? {
        return Err(IndexFallback::Absent);
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
        // The tombstones since the latest checkpoint, and that checkpoint.
        let mut removed: HashMap<u64, Removed> = HashMap::new();
        let mut parts = Parts::default();
        let mut checkpoint: Option<Checkpoint> = None;
        read_to_marker(&*channel, &removals, None, &id, |delivery| {
            if is_part(&delivery.properties) {
                if let Some(whole) = parts.take(&delivery.data) {
                    checkpoint = Some(whole);
                    removed.clear();
                }
                return;
            }
            for (key, group) in removals_in(&delivery.properties, &delivery.data) {
                let removal = removed.entry(key).or_default();
                removal.left += 1;
                removal.group = group.or(removal.group);
            }
        })
        .await?;
        // The checkpoint's groups come first: they are the older messages.
        let mut tally = GroupTally::default();
        let mut kept = GroupTally::default();
        let start = checkpoint.as_ref().map(|c| c.entries_offset);
        if let Some(checkpoint) = checkpoint {
            for group in checkpoint.groups {
                if filter.group.as_ref().is_none_or(|id| *id == group.id) {
                    tally.add_group(group.clone());
                }
                kept.add_group(group);
            }
        }
        let mut live = 0;
        read_to_marker(&*channel, &entries, start, &id, |delivery| {
            if let Some(removal) = removed.get_mut(&key_of(&delivery.properties))
                && removal.left > 0
            {
                removal.left -= 1;
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
        // Tombstones that cancelled no later entry: removals of dead
        // letters the checkpoint counts.
        for removal in removed.values().filter(|r| r.left > 0) {
            if let Some(group) = removal.group.map(group_of_number) {
                let taken = kept.subtract(&group, removal.left as usize);
                tally.subtract(&group, taken);
            }
        }
        let from_checkpoint = kept.total();
        let indexed = live + from_checkpoint;
        if indexed != before as usize {
            return Err(IndexFallback::CountMismatch {
                indexed,
                depth: before as usize,
            });
        }
        if from_checkpoint > 0 && filter.needs_messages() {
            return Err(IndexFallback::FilterPastCheckpoint {
                checkpointed: from_checkpoint,
            });
        }
        Ok(IndexRead {
            groups: tally.into_groups(),
            checkpoint: start,
        })
    }
    .await;
    channel.close().await;
    result
}

/// Whether the index of `names` is there: both its streams.
pub(crate) async fn index_exists(
    connection: &dyn Connection,
    names: &TopologyNames,
) -> Result<bool, Error> {
    for stream in [
        names.dead_letter_index(),
        names.dead_letter_index_removals(),
    ] {
        if inspect_queue(connection, &stream).await?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
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
