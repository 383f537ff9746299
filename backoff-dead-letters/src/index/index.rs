//! Reading the dead-letter index instead of the dead-letter queue.
//!
//! The index is two streams beside the queue
//! ([`DeadLetterIndexDecl`](rabbit_backoff_core::DeadLetterIndexDecl)): the
//! consumer writes an entry of every dead letter it makes to `entries`,
//! many to a message ([`index_entries`](crate::index::index_entries) reads
//! them, and the whole dead letters of an index written before), and the
//! operator tools write a tombstone to `removals` for each dead letter they
//! remove. Reading it takes none of the queue's messages, so it costs the
//! queue's process nothing.
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
//! shovel; or reached it without an entry: the broker's own dead-lettering,
//! another publisher, an entry the consumer's writer dropped) and the
//! caller reads the queue instead. A text search always reads the queue:
//! an entry keeps no body and few headers.
//!
//! The entries are read in ranges of offsets at once, each on a channel of
//! its own ([`Dlq::index_readers`](crate::Dlq::index_readers)): the broker
//! turns a stream's messages into AMQP 0-9-1 deliveries in the process of
//! the channel that reads them, one core a channel, and that is what a read
//! of a large index waits for. Each range counts its groups apart, and they
//! are added up in the stream's order, which gives the groups of one read
//! from start to end (counts, time spans, examples, the order of ties). A
//! range cancels entries with the tombstones as they were before the
//! ranges in front of it; a [`TombstoneLedger`] checks that guess in order,
//! and a range where it was wrong (a key with entries in two ranges: a dead
//! letter written twice alike) is read again with the tombstones left.
//!
//! The entries are read over the stream protocol when the broker serves it
//! ([`Dlq::stream_protocol`](crate::Dlq::stream_protocol)): the broker then
//! sends the stream's chunks as stored, which costs it a fraction of the
//! deliveries; a range it cannot read that way (the port does not answer or
//! refuses, a message it cannot turn back into AMQP 0-9-1) is read over
//! AMQP, with a debug log line.
//!
//! After a [checkpoint](crate::index::checkpoint), the read
//! starts from it: its groups, the tombstones written after it, and the
//! entries after its offset; a tombstone that cancels no such entry comes
//! out of the checkpoint's group it names.
//!
//! The blind spot: a removal without a tombstone and an arrival without an
//! entry that happen between two reads cancel out in the count, and the
//! index then shows the removed message's group instead of the arrived
//! one's, until either leaves the queue through a pass.

use std::collections::HashMap;
use std::ops::Range;

use futures_util::future::try_join_all;
use rabbit_backoff_core::{TombstoneLedger, TopologyNames, split_offsets};

use crate::filter::DeadLetterFilter;
use crate::group::{DeadLetterGroup, GroupTally};
use crate::index::checkpoint::{Checkpoint, Parts, is_part};
use crate::index::index_entries::each_entry;
use crate::index::index_fallback::IndexFallback;
use crate::index::index_protocol::IndexProtocol;
use crate::index::index_stream::{
    STREAM_OFFSET, Until, mark_end, offset_now, read_to_marker, read_until, unreadable,
};
use crate::index::stream_protocol::{self, StreamEndpoint};
use crate::index::tombstones::{group_of_number, removals_in};
use crate::key::key_of;
use crate::message::DeadLetterMessage;
use crate::run_id::run_id;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{confirm_channel, inspect_queue};
use rabbit_backoff_runtime::transport::{Connection, Delivery};

/// The groups an index read found, and where it started.
#[derive(Debug)]
pub(crate) struct IndexRead {
    /// The groups, largest first.
    pub(crate) groups: Vec<DeadLetterGroup>,
    /// The entries' offset of the checkpoint it started from, if any.
    pub(crate) checkpoint: Option<u64>,
    /// How its entries were read: over the stream protocol when every
    /// range was; none when there were none to read.
    pub(crate) protocol: Option<IndexProtocol>,
}

/// The fewest entries a range of a read holds: a shorter index is read by
/// one channel.
const MIN_RANGE: u64 = 10_000;

/// Removals of one key since the checkpoint: how many, and their group
/// (none in tombstones written before groups were).
#[derive(Debug, Default, Clone, Copy)]
struct Removed {
    left: u32,
    group: Option<u64>,
}

/// The groups of the dead letters in the queue of `names` that match
/// `filter`, read from the index with up to `readers` channels (or
/// connections of the stream protocol at `stream`) at once; why not, when
/// it cannot be.
pub(crate) async fn index_groups(
    connection: &dyn Connection,
    names: &TopologyNames,
    filter: &DeadLetterFilter,
    readers: usize,
    stream: Option<&StreamEndpoint>,
) -> Result<IndexRead, IndexFallback> {
    if filter.limit.is_some() {
        return Err(IndexFallback::Limited);
    }
    if filter.text.is_some() {
        return Err(IndexFallback::TextSearch);
    }
    let entries = names.dead_letter_index();
    let removals = names.dead_letter_index_removals();
    if !index_exists(connection, names).await.map_err(unreadable)? {
        return Err(IndexFallback::Absent);
    }
    let queue = &names.dead_letter_queue;
    let before = depth(connection, queue).await?;
    let id = run_id();
    let channel = confirm_channel(connection, &entries)
        .await
        .map_err(unreadable)?;
    let result = async {
        mark_end(&*channel, &removals, &id).await?;
        let end = offset_now(connection, &entries).await?;
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
        // The entries, in ranges read at once, added up in order.
        let from = start.map_or(0, |offset| offset.saturating_add(1));
        let ranges = split_offsets(from, end, readers, MIN_RANGE);
        let tombstones: HashMap<u64, u32> = removed.iter().map(|(k, r)| (*k, r.left)).collect();
        let reads = try_join_all(ranges.iter().map(|range| {
            read_range(
                connection,
                &entries,
                range.clone(),
                &tombstones,
                filter,
                stream,
            )
        }))
        .await?;
        let protocol = reads
            .iter()
            .map(|read| read.protocol)
            .reduce(|a, b| if a == b { a } else { IndexProtocol::Amqp });
        let mut ledger = TombstoneLedger::new(tombstones.clone());
        let mut live = 0;
        for (range, read) in ranges.into_iter().zip(reads) {
            let read = if ledger.settle(&tombstones, &read.seen) {
                read
            } else {
                let left = ledger.left().clone();
                let again = read_range(connection, &entries, range, &left, filter, stream).await?;
                ledger.settle(&left, &again.seen);
                again
            };
            live += read.live;
            for group in read.tally.into_seen_order() {
                tally.add_group(group);
            }
        }
        // Tombstones that cancelled no later entry: removals of dead
        // letters the checkpoint counts.
        for (key, &left) in ledger.left().iter().filter(|(_, left)| **left > 0) {
            if let Some(group) = removed
                .get(key)
                .and_then(|removal| removal.group)
                .map(group_of_number)
            {
                let taken = kept.subtract(&group, left as usize);
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
            protocol,
        })
    }
    .await;
    channel.close().await;
    result
}

/// What one range of the entries held.
struct RangeRead {
    /// The groups of its live entries that match the filter.
    tally: GroupTally,
    /// Its live entries.
    live: usize,
    /// Per tombstoned key, its entries of that key (cancelled or not).
    seen: HashMap<u64, u32>,
    /// How it was read.
    protocol: IndexProtocol,
}

impl RangeRead {
    fn new(protocol: IndexProtocol) -> Self {
        RangeRead {
            tally: GroupTally::default(),
            live: 0,
            seen: HashMap::new(),
            protocol,
        }
    }

    /// Takes the entries of one message of the stream.
    fn take(&mut self, message: &Delivery, assumed: &HashMap<u64, u32>, filter: &DeadLetterFilter) {
        each_entry(message, |entry, body_len| {
            self.take_entry(entry, body_len, assumed, filter);
        });
    }

    /// Takes one entry (the delivery it stands for, and its body's size):
    /// cancelled by a tombstone `assumed` left, or live and grouped when it
    /// matches `filter`.
    fn take_entry(
        &mut self,
        delivery: &Delivery,
        body_len: usize,
        assumed: &HashMap<u64, u32>,
        filter: &DeadLetterFilter,
    ) {
        let key = key_of(&delivery.properties);
        if let Some(&tombstones) = assumed.get(&key) {
            let seen = self.seen.entry(key).or_default();
            *seen += 1;
            if *seen <= tombstones {
                return;
            }
        }
        self.live += 1;
        // Its position within the range: no filter reads it.
        let mut summary = DeadLetterMessage::of(delivery, self.live - 1);
        summary.body_len = body_len;
        summary.headers.remove(STREAM_OFFSET);
        if filter.matches_with_body(&summary, &delivery.data) {
            self.tally.add(&summary);
        }
    }
}

/// Reads the entries of `stream` at the offsets `range`, over the stream
/// protocol at `over` when it can, else on a channel of its own,
/// cancelling the first entries of each key with the tombstones `assumed`
/// (see [`TombstoneLedger`]).
async fn read_range(
    connection: &dyn Connection,
    stream: &str,
    range: Range<u64>,
    assumed: &HashMap<u64, u32>,
    filter: &DeadLetterFilter,
    over: Option<&StreamEndpoint>,
) -> Result<RangeRead, IndexFallback> {
    if let Some(endpoint) = over {
        let mut read = RangeRead::new(IndexProtocol::Stream);
        match stream_protocol::read_range(endpoint, stream, range.clone(), |delivery| {
            read.take(delivery, assumed, filter)
        })
        .await
        {
            Ok(()) => return Ok(read),
            Err(e) => tracing::debug!("{e}; reading the range {range:?} over AMQP"),
        }
    }
    let channel = confirm_channel(connection, stream)
        .await
        .map_err(unreadable)?;
    let mut read = RangeRead::new(IndexProtocol::Amqp);
    let after = range.start.checked_sub(1);
    let result = read_until(
        &*channel,
        stream,
        after,
        Until::Offset(range.end),
        |delivery| read.take(delivery, assumed, filter),
    )
    .await;
    channel.close().await;
    result.map(|_| read)
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
