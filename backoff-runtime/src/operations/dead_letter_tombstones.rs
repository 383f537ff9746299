//! Tombstones: what the operator tools removed from a dead-letter queue,
//! written to the dead-letter index's tombstone stream so that the index
//! stops counting it.

use lapin::BasicProperties;
use rabbit_backoff_core::TopologyNames;

use crate::operations::dead_letter_key::key_of;
use crate::transport::error::{Error, channel_error};
use crate::transport::open::confirm_channel;
use crate::transport::values::PERSISTENT;
use crate::transport::{Confirm, Connection, TransportError};

/// Keys in one tombstone message (8 bytes each).
pub(crate) const KEYS_PER_TOMBSTONE: usize = 1024;

/// The keys of the dead letters a pass removed, written once it is done.
pub(crate) struct Tombstones {
    stream: String,
    keys: Vec<u64>,
}

impl Tombstones {
    /// No tombstone yet, for the index of the dead-letter queue of `names`.
    pub(crate) fn new(names: &TopologyNames) -> Self {
        Tombstones {
            stream: names.dead_letter_index_removals(),
            keys: Vec::new(),
        }
    }

    /// Records that the dead letter with `properties` left the queue.
    pub(crate) fn add(&mut self, properties: &BasicProperties) {
        self.keys.push(key_of(properties));
    }

    /// Publishes the tombstones straight to the tombstone stream (the
    /// default exchange, so that no binding sends them elsewhere), each
    /// confirmed, [`KEYS_PER_TOMBSTONE`] keys a message. Nothing happens
    /// when the stream does not exist (an index never declared, the
    /// in-memory broker): the message comes back unroutable.
    pub(crate) async fn write(self, connection: &dyn Connection) -> Result<(), Error> {
        if self.keys.is_empty() {
            return Ok(());
        }
        let stream = &self.stream;
        let channel = confirm_channel(connection, stream).await?;
        let result = async {
            for chunk in self.keys.chunks(KEYS_PER_TOMBSTONE) {
                let body: Vec<u8> = chunk.iter().flat_map(|k| k.to_be_bytes()).collect();
                let confirm = channel
                    .publish(
                        "",
                        stream,
                        &body,
                        BasicProperties::default().with_delivery_mode(PERSISTENT),
                    )
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

/// The keys a tombstone message carries.
pub(crate) fn keys_in(body: &[u8]) -> impl Iterator<Item = u64> + '_ {
    body.chunks_exact(8)
        .map(|chunk| u64::from_be_bytes(chunk.try_into().expect("8 bytes")))
}
