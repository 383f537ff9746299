//! Writing entries of the dead-letter index for dead letters the operator
//! tools put in the queue themselves (`dlq import`, a replay whose copies go
//! back to the dead-letter queue), as the consumer's index writer writes
//! those of the dead letters it makes: in batches
//! ([`IndexBatch`]), straight to the entries stream, each confirmed.

use std::sync::Arc;

use lapin::BasicProperties;
use lapin::types::ShortString;
use rabbit_backoff_core::{IndexBatch, IndexEntry, TopologyNames};
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{
    INDEX_BATCH_ENTRIES, PERSISTENT, channel_error, confirm_channel,
};
use rabbit_backoff_runtime::transport::{
    Channel, Confirm, Connection, Publication, TransportError,
};

/// Collects entries and writes them to the index of one dead-letter queue,
/// [`INDEX_BATCH_ENTRIES`] to a message. Without an index (its stream is not
/// there) it writes nothing, and says so by writing none.
pub(crate) struct EntryWriter {
    stream: String,
    channel: Option<Arc<dyn Channel>>,
    batch: IndexBatch,
    written: usize,
    /// No index to write to: the first batch found no stream.
    absent: bool,
}

impl EntryWriter {
    /// A writer to the index of the queue of `names`, on a channel of its
    /// own on `connection` (opened with the first batch).
    pub(crate) fn new(names: &TopologyNames) -> Self {
        EntryWriter {
            stream: names.dead_letter_index(),
            channel: None,
            batch: IndexBatch::default(),
            written: 0,
            absent: false,
        }
    }

    /// Adds `entry`; writes the batch once it is full.
    pub(crate) async fn add(
        &mut self,
        connection: &dyn Connection,
        entry: IndexEntry,
    ) -> Result<(), Error> {
        self.batch.entries.push(entry);
        if self.batch.entries.len() >= INDEX_BATCH_ENTRIES {
            self.flush(connection).await?;
        }
        Ok(())
    }

    /// Writes what is left, closes its channel; how many entries it wrote
    /// in all (none without an index).
    pub(crate) async fn finish(mut self, connection: &dyn Connection) -> Result<usize, Error> {
        let flushed = self.flush(connection).await;
        self.close().await;
        flushed.map(|()| self.written)
    }

    /// Closes its channel, writing nothing more.
    pub(crate) async fn close(&mut self) {
        if let Some(channel) = self.channel.take() {
            channel.close().await;
        }
    }

    /// Writes `entries` to the index of the queue of `names`: how many
    /// (none without an index).
    pub(crate) async fn write_all(
        connection: &dyn Connection,
        names: &TopologyNames,
        entries: impl IntoIterator<Item = IndexEntry>,
    ) -> Result<usize, Error> {
        let mut writer = EntryWriter::new(names);
        for entry in entries {
            if let Err(e) = writer.add(connection, entry).await {
                writer.close().await;
                return Err(e);
            }
        }
        writer.finish(connection).await
    }

    async fn flush(&mut self, connection: &dyn Connection) -> Result<(), Error> {
        let batch = std::mem::take(&mut self.batch);
        if batch.entries.is_empty() || self.absent {
            return Ok(());
        }
        let channel = match &self.channel {
            Some(channel) => Arc::clone(channel),
            None => {
                let channel = confirm_channel(connection, &self.stream).await?;
                self.channel = Some(Arc::clone(&channel));
                channel
            }
        };
        let properties = BasicProperties::default()
            .with_content_type(ShortString::from(IndexBatch::CONTENT_TYPE))
            .with_delivery_mode(PERSISTENT);
        let confirm = channel
            .publish(Publication::new(
                "",
                &self.stream,
                &batch.encode(),
                properties,
            ))
            .await
            .map_err(channel_error(&self.stream, WRITING))?;
        match confirm {
            Confirm::Ack => {
                self.written += batch.entries.len();
                Ok(())
            }
            Confirm::Returned => {
                self.absent = true;
                Ok(())
            }
            Confirm::Nack => Err(Error::Channel {
                action: WRITING,
                queue: self.stream.clone(),
                source: TransportError::Other("the broker did not take them (Nack)".to_owned()),
            }),
        }
    }
}

const WRITING: &str = "writing entries of the dead-letter index";
