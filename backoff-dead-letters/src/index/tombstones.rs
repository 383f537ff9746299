//! Tombstones: what the operator tools removed from a dead-letter queue,
//! written to the dead-letter index's tombstone stream so that the index
//! stops counting it.
//!
//! A tombstone message holds [`KEYS_PER_TOMBSTONE`] removals, each the
//! dead letter's key and its group id (16 bytes, the layout named by the
//! [`TOMBSTONE_LAYOUT`] header): the key cancels an entry of the index, and
//! where the entry is older than the index's checkpoint, the group says
//! which of the checkpoint's groups the removal comes out of. Tombstones
//! written before the layout existed are 8-byte keys, without a group.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use rabbit_backoff_core::TopologyNames;
use rabbit_backoff_core::headers::TOMBSTONE_LAYOUT;

use crate::key::key_of;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{PERSISTENT, channel_error, confirm_channel};
use rabbit_backoff_runtime::transport::{Confirm, Connection, Publication, TransportError};

/// Removals in one tombstone message.
pub(crate) const KEYS_PER_TOMBSTONE: usize = 1024;

/// The value of [`TOMBSTONE_LAYOUT`] for a key and a group a removal.
const KEY_AND_GROUP: &str = "key+group";

/// The keys and groups of the dead letters a pass removed, written once it
/// is done.
pub(crate) struct Tombstones {
    stream: String,
    removals: Vec<(u64, u64)>,
}

impl Tombstones {
    /// No tombstone yet, for the index of the dead-letter queue of `names`.
    pub(crate) fn new(names: &TopologyNames) -> Self {
        Tombstones {
            stream: names.dead_letter_index_removals(),
            removals: Vec::new(),
        }
    }

    /// Records that the dead letter with `properties`, of the group `group`
    /// ([`DeadLetterMessage::group`](crate::DeadLetterMessage::group)), left
    /// the queue.
    pub(crate) fn add(&mut self, properties: &BasicProperties, group: &str) {
        self.removals
            .push((key_of(properties), group_number(group).unwrap_or(0)));
    }

    /// Publishes the tombstones straight to the tombstone stream (the
    /// default exchange, so that no binding sends them elsewhere), each
    /// confirmed, [`KEYS_PER_TOMBSTONE`] keys a message. Nothing happens
    /// when the stream does not exist (an index never declared, the
    /// in-memory broker): the message comes back unroutable.
    pub(crate) async fn write(self, connection: &dyn Connection) -> Result<(), Error> {
        if self.removals.is_empty() {
            return Ok(());
        }
        let stream = &self.stream;
        let channel = confirm_channel(connection, stream).await?;
        let result = async {
            let mut headers = FieldTable::default();
            headers.insert(
                ShortString::from(TOMBSTONE_LAYOUT),
                AMQPValue::LongString(LongString::from(KEY_AND_GROUP)),
            );
            let properties = BasicProperties::default()
                .with_delivery_mode(PERSISTENT)
                .with_headers(headers);
            for chunk in self.removals.chunks(KEYS_PER_TOMBSTONE) {
                let body: Vec<u8> = chunk
                    .iter()
                    .flat_map(|(key, group)| {
                        key.to_be_bytes().into_iter().chain(group.to_be_bytes())
                    })
                    .collect();
                let confirm = channel
                    .publish(Publication::new("", stream, &body, properties.clone()))
                    .await
                    .map_err(channel_error(stream, "writing the index's tombstones"))?;
                match confirm {
                    Confirm::Ack => {}
                    Confirm::Returned => return Ok(()),
                    Confirm::Nack => {
                        return Err(Error::Channel {
                            action: "writing the index's tombstones",
                            queue: stream.clone(),
                            source: TransportError::Other(
                                "the broker did not take them (Nack)".into(),
                            ),
                        });
                    }
                }
            }
            Ok(())
        }
        .await;
        channel.close().await;
        result
    }
}

/// The removals a tombstone message carries: each key, with its group when
/// the message has one (see [`group_number`]).
pub(crate) fn removals_in<'a>(
    properties: &BasicProperties,
    body: &'a [u8],
) -> Box<dyn Iterator<Item = (u64, Option<u64>)> + 'a> {
    let layout = properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(TOMBSTONE_LAYOUT));
    let word = |bytes: &[u8]| u64::from_be_bytes(bytes.try_into().expect("8 bytes"));
    match layout {
        None => Box::new(body.chunks_exact(8).map(move |key| (word(key), None))),
        Some(AMQPValue::LongString(layout)) if layout.as_bytes() == KEY_AND_GROUP.as_bytes() => {
            Box::new(
                body.chunks_exact(16)
                    .map(move |pair| (word(&pair[..8]), Some(word(&pair[8..])))),
            )
        }
        // A layout of a later version: nothing this one can read.
        Some(_) => Box::new(std::iter::empty()),
    }
}

/// A group id (12 hex digits) as a number, the way tombstones carry it.
pub(crate) fn group_number(id: &str) -> Option<u64> {
    u64::from_str_radix(id, 16).ok()
}

/// The group id of a number a tombstone carries.
pub(crate) fn group_of_number(number: u64) -> String {
    format!("{number:012x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removals_read_both_layouts() {
        let key_only: Vec<u8> = [7u64, 9].iter().flat_map(|k| k.to_be_bytes()).collect();
        let plain = BasicProperties::default();
        assert_eq!(
            removals_in(&plain, &key_only).collect::<Vec<_>>(),
            [(7, None), (9, None)]
        );
        let mut headers = FieldTable::default();
        headers.insert(
            ShortString::from(TOMBSTONE_LAYOUT),
            AMQPValue::LongString(LongString::from(KEY_AND_GROUP)),
        );
        let grouped = BasicProperties::default().with_headers(headers);
        let group = group_number("00ab12cd34ef").unwrap();
        let body: Vec<u8> = 7u64
            .to_be_bytes()
            .into_iter()
            .chain(group.to_be_bytes())
            .collect();
        assert_eq!(
            removals_in(&grouped, &body).collect::<Vec<_>>(),
            [(7, Some(group))]
        );
        assert_eq!(group_of_number(group), "00ab12cd34ef");
    }
}
