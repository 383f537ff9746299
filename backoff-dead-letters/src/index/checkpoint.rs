//! A checkpoint of the dead-letter index: what a pass saw in the queue,
//! standing for every entry of the index before an offset.
//!
//! Once messages leave the queue without a tombstone (a purge from outside,
//! a queue deleted and declared again, a length limit) or reach it without
//! an entry (the broker's own dead-lettering), the index's
//! live entries never match the queue again, and every read would be a
//! pass. So the pass that a read falls back to leaves a checkpoint: the
//! offset of the entries' stream when it began (read by publishing a marker
//! to the stream, before the pass), and the groups it saw, per group (count,
//! time span, example), not per message. A later read starts from the
//! checkpoint's groups, adds the entries after its offset, takes off the
//! tombstones written after it, and checks the count again.
//!
//! Where it is kept: in the index's tombstone stream, as one or more
//! messages with the [`INDEX_CHECKPOINT`] header (a JSON body,
//! [`GROUPS_PER_PART`] groups a message). A read already reads that stream
//! from its start before the entries, so it finds the latest checkpoint at
//! no extra cost, and the checkpoint's place among the tombstones is what
//! it needs: the tombstones before it are already counted in it, those
//! after it are not. No object is declared for it, so a topology declared
//! before checkpoints existed, or by an operator, has them too.
//!
//! Why per group and not per message: the checkpoint stays as small as the
//! list of groups whatever the queue holds (a million dead letters of three
//! groups: three groups), and a read holds nothing per message of it. A
//! removal that comes out of a checkpoint's group is known by the group id
//! that every tombstone carries (see
//! [`Tombstones`](crate::index::tombstones::Tombstones)).
//! What that costs: a checkpoint knows no message's headers or body, so a
//! read with a filter other than `group` can use the index only once every
//! dead letter of the checkpoint has left; and a removal from a
//! checkpoint's group leaves that group's time span and example as the
//! pass saw them.
//!
//! Messages that arrive while the pass runs: those behind the pass's end
//! are not in it, and their entries come after the offset. Those that came
//! between the marker and the pass's end are in both; the writer reads the
//! entries after the offset once the pass is done and takes out of its
//! groups every one whose key it saw among the last [`TAIL`] messages of
//! the pass (where the newest messages are). A message counted twice all
//! the same, or missed (its entry written just before the marker but the
//! message queued just after the pass's end), makes the next read's count
//! differ, and that read's pass writes a new checkpoint.

use std::collections::{HashMap, VecDeque};

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use rabbit_backoff_core::TopologyNames;
use rabbit_backoff_core::headers::INDEX_CHECKPOINT;
use serde::{Deserialize, Serialize};

use crate::group::{DeadLetterGroup, GroupTally};
use crate::index::index_entries::each_entry;
use crate::index::index_fallback::IndexFallback;
use crate::index::index_stream::{mark_end, offset_now, read_to_marker};
use crate::key::key_of;
use crate::message::DeadLetterMessage;
use crate::run_id::run_id;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{PERSISTENT, channel_error, confirm_channel};
use rabbit_backoff_runtime::transport::{
    Confirm, Connection, Delivery, Publication, TransportError,
};

/// Groups in one message of a checkpoint.
pub(crate) const GROUPS_PER_PART: usize = 200;

/// The checkpoint's format, the value of its header.
const FORMAT: &str = "1";

/// Messages a writer remembers from the end of its pass.
pub(crate) const TAIL: usize = 10_000;

/// One message of a checkpoint.
#[derive(Debug, Serialize, Deserialize)]
struct Part {
    /// The checkpoint's id, the same in each of its parts.
    id: String,
    /// This part's place, from 0.
    part: u32,
    /// How many parts.
    parts: u32,
    /// The entries' stream offset it stands for: it and every entry before.
    entries_offset: u64,
    /// Its groups, in the order the pass first saw them.
    groups: Vec<DeadLetterGroup>,
}

/// A whole checkpoint, as a read found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// The entries' offset it stands for (that entry and every one before).
    pub(crate) entries_offset: u64,
    /// What the queue held then, per group, in the order first seen.
    pub(crate) groups: Vec<DeadLetterGroup>,
}

/// Whether a message of the tombstone stream is part of a checkpoint.
pub(crate) fn is_part(properties: &BasicProperties) -> bool {
    properties
        .headers()
        .as_ref()
        .is_some_and(|h| h.inner().contains_key(INDEX_CHECKPOINT))
}

/// The parts of a checkpoint met so far by a reader of the tombstone
/// stream, in order.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    pending: Option<Part>,
}

impl Parts {
    /// Takes the next part (the body of a message [`is_part`]); the whole
    /// checkpoint once its last part came. A part out of order (two
    /// writers at once, or one that stopped midway) drops what came before
    /// it; a body that is not a part is skipped.
    pub(crate) fn take(&mut self, body: &[u8]) -> Option<Checkpoint> {
        let part: Part = match serde_json::from_slice(body) {
            Ok(part) => part,
            Err(e) => {
                tracing::debug!("skipping an unreadable checkpoint of the index: {e}");
                return None;
            }
        };
        let next = match self.pending.take() {
            Some(mut pending)
                if part.part > 0
                    && pending.id == part.id
                    && pending.part + 1 == part.part
                    && pending.parts == part.parts =>
            {
                pending.part = part.part;
                pending.groups.extend(part.groups);
                pending
            }
            _ if part.part == 0 => part,
            _ => return None,
        };
        if next.part + 1 >= next.parts {
            return Some(Checkpoint {
                entries_offset: next.entries_offset,
                groups: next.groups,
            });
        }
        self.pending = Some(next);
        None
    }
}

/// A checkpoint in the making, from before its pass to after it.
pub(crate) struct CheckpointWriter {
    entries: String,
    removals: String,
    offset: u64,
    tally: GroupTally,
    /// The key and group of the last [`TAIL`] messages the pass saw.
    tail: VecDeque<(u64, String)>,
}

impl CheckpointWriter {
    /// Marks where the entries' stream is, before the pass over the queue
    /// of `names` starts.
    pub(crate) async fn begin(
        connection: &dyn Connection,
        names: &TopologyNames,
    ) -> Result<Self, Error> {
        let offset = entries_offset(connection, names).await?;
        Ok(CheckpointWriter {
            entries: names.dead_letter_index(),
            removals: names.dead_letter_index_removals(),
            offset,
            tally: GroupTally::default(),
            tail: VecDeque::new(),
        })
    }

    /// Counts one message of the pass (every message, whatever a filter
    /// selects).
    pub(crate) fn observe(&mut self, delivery: &Delivery, message: &DeadLetterMessage) {
        self.tally.add(message);
        if self.tail.len() == TAIL {
            self.tail.pop_front();
        }
        self.tail
            .push_back((key_of(&delivery.properties), message.group.clone()));
    }

    /// After the pass: takes out what also has an entry after the offset,
    /// then writes the checkpoint; the entries' offset it stands for.
    pub(crate) async fn finish(mut self, connection: &dyn Connection) -> Result<u64, Error> {
        let mut late = self.late_entries(connection).await?;
        for (key, group) in self.tail.iter().rev() {
            if let Some(left) = late.get_mut(key)
                && *left > 0
            {
                *left -= 1;
                self.tally.subtract(group, 1);
            }
        }
        write(
            connection,
            &self.removals,
            self.offset,
            self.tally.into_seen_order(),
        )
        .await?;
        Ok(self.offset)
    }

    /// The keys of the entries written since the offset.
    async fn late_entries(&self, connection: &dyn Connection) -> Result<HashMap<u64, u32>, Error> {
        let stream = &self.entries;
        let channel = confirm_channel(connection, stream).await?;
        let id = run_id();
        let mut late: HashMap<u64, u32> = HashMap::new();
        let read = async {
            mark_end(&*channel, stream, &id).await?;
            read_to_marker(&*channel, stream, Some(self.offset), &id, |message| {
                each_entry(message, |entry, _| {
                    *late.entry(key_of(&entry.properties)).or_default() += 1;
                });
            })
            .await
        }
        .await;
        channel.close().await;
        read.map_err(|why| failed(stream, why))?;
        Ok(late)
    }
}

/// The offset of a marker published now to the entries' stream of the
/// index of `names`: where a checkpoint taken now starts.
pub(crate) async fn entries_offset(
    connection: &dyn Connection,
    names: &TopologyNames,
) -> Result<u64, Error> {
    let entries = names.dead_letter_index();
    let offset = offset_now(connection, &entries)
        .await
        .map_err(|why| failed(&entries, why))?;
    Ok(offset)
}

/// Writes the checkpoint `groups` at `offset` to the tombstone stream
/// `removals`, each part confirmed.
pub(crate) async fn write(
    connection: &dyn Connection,
    removals: &str,
    offset: u64,
    groups: Vec<DeadLetterGroup>,
) -> Result<(), Error> {
    let id = run_id();
    let mut chunks: Vec<Vec<DeadLetterGroup>> = Vec::new();
    let mut groups = groups.into_iter().peekable();
    while groups.peek().is_some() || chunks.is_empty() {
        chunks.push(groups.by_ref().take(GROUPS_PER_PART).collect());
    }
    let parts = u32::try_from(chunks.len()).unwrap_or(u32::MAX);
    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from(INDEX_CHECKPOINT),
        AMQPValue::LongString(LongString::from(FORMAT)),
    );
    let properties = BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_content_type(ShortString::from("application/json"))
        .with_headers(headers);
    let channel = confirm_channel(connection, removals).await?;
    let result = async {
        for (part, groups) in chunks.into_iter().enumerate() {
            let body = serde_json::to_vec(&Part {
                id: id.clone(),
                part: u32::try_from(part).unwrap_or(u32::MAX),
                parts,
                entries_offset: offset,
                groups,
            })
            .map_err(|e| refused(removals, &e.to_string()))?;
            let confirm = channel
                .publish(Publication::new("", removals, &body, properties.clone()))
                .await
                .map_err(channel_error(removals, WRITING))?;
            match confirm {
                Confirm::Ack => {}
                Confirm::Returned => {
                    return Err(refused(
                        removals,
                        "the stream is not there: declare the dead-letter index",
                    ));
                }
                Confirm::Nack => {
                    return Err(refused(removals, "the broker did not take it (Nack)"));
                }
            }
        }
        Ok(())
    }
    .await;
    channel.close().await;
    result
}

const WRITING: &str = "writing a checkpoint of the dead-letter index";

fn refused(stream: &str, why: &str) -> Error {
    Error::Channel {
        action: WRITING,
        queue: stream.to_owned(),
        source: TransportError::Other(why.to_owned()),
    }
}

fn failed(stream: &str, why: IndexFallback) -> Error {
    refused(stream, &why.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(id: &str, count: usize) -> DeadLetterGroup {
        DeadLetterGroup {
            id: id.to_owned(),
            count,
            reason: "permanent".to_owned(),
            fingerprint: "order <n> not found".to_owned(),
            first_failed_at: None,
            last_failed_at: None,
            example_message_id: None,
            example_error: None,
        }
    }

    fn part(id: &str, part: u32, parts: u32, groups: Vec<DeadLetterGroup>) -> Vec<u8> {
        serde_json::to_vec(&Part {
            id: id.to_owned(),
            part,
            parts,
            entries_offset: 41,
            groups,
        })
        .unwrap()
    }

    #[test]
    fn a_checkpoint_is_whole_only_with_every_part_in_order() {
        let mut parts = Parts::default();
        assert_eq!(
            parts.take(&part("a", 0, 1, vec![])),
            Some(Checkpoint {
                entries_offset: 41,
                groups: vec![]
            })
        );
        assert_eq!(parts.take(&part("b", 0, 2, vec![group("1", 1)])), None);
        // Another writer's part in between drops the first.
        assert_eq!(parts.take(&part("c", 1, 2, vec![group("2", 1)])), None);
        assert_eq!(parts.take(&part("b", 1, 2, vec![group("2", 1)])), None);
        assert_eq!(parts.take(&part("d", 0, 2, vec![group("1", 1)])), None);
        let whole = parts.take(&part("d", 1, 2, vec![group("2", 3)])).unwrap();
        assert_eq!(whole.groups, vec![group("1", 1), group("2", 3)]);
        assert_eq!(parts.take(b"not json"), None);
    }
}
