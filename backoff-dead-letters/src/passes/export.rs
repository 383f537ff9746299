//! Export and import of dead letters as JSON lines.

use crate::dlq::Dlq;
use crate::passes::report::SkippedMessage;
use crate::passes::scan::{Mode, Sink};
use std::sync::Arc;

use serde::Serialize;

use crate::filter::DeadLetterFilter;
use crate::message::DeadLetterMessage;

use crate::index::entry_writer::EntryWriter;
use crate::record::DeadLetterRecord;
use rabbit_backoff_core::IndexEntry;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{confirm_channel, index_entry, set_aside_reason};
use rabbit_backoff_runtime::transport::{
    Confirm, Delivery, PendingConfirm, Publication, TransportError,
};

/// Copies an import keeps in flight before it waits for confirmations.
const IMPORT_WINDOW: usize = 500;

/// What [`Dlq::export`] wrote.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ExportReport {
    /// Messages written.
    pub exported: usize,
    /// Matching messages that could not be written, with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedMessage>,
    /// Messages in the dead-letter queue (an export removes none).
    pub kept: usize,
}

impl Dlq {
    /// Writes each matching message, whole, as one line of JSON (a
    /// [`DeadLetterRecord`]) to `out`, without removing any or changing
    /// their order. Messages whose headers nest deeper than
    /// [`MAX_HEADER_DEPTH`](rabbit_backoff_core::MAX_HEADER_DEPTH) are not
    /// written (they stay in the queue, intact); the report lists them.
    pub async fn export(
        &self,
        filter: &DeadLetterFilter,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<ExportReport, Error> {
        let mut exported = 0;
        let mut skipped = Vec::new();
        let mut write = |delivery: &Delivery, message: &DeadLetterMessage| {
            if let Some(reason) = set_aside_reason(&delivery.properties) {
                skipped.push(SkippedMessage {
                    message: message.clone(),
                    reason,
                });
                return Ok(());
            }
            serde_json::to_writer(&mut *out, &DeadLetterRecord::of(delivery))
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|e| Error::Io {
                    action: "writing the export",
                    source: Arc::new(e),
                })?;
            exported += 1;
            Ok(())
        };
        let report = self
            .scan(filter, Mode::Peek, Sink::Visit(&mut write))
            .await?;
        out.flush().map_err(|e| Error::Io {
            action: "writing the export",
            source: Arc::new(e),
        })?;
        Ok(ExportReport {
            exported,
            skipped,
            kept: report.kept,
        })
    }

    /// Publishes each record to the dead-letter queue, exactly as exported
    /// (properties, header types, body), in order, each confirmed by the
    /// broker. The records go through the dead-letter exchange with the
    /// dead-letter routing key of the consumer's topology, the route its
    /// dead letters take, so that an export of the import names the same
    /// exchange and routing key as the records. A dead-letter exchange that
    /// is missing, or that does not route the key to the queue, stops the
    /// import with an error naming both (nothing is lost: a returned
    /// message is not enqueued). The dead-letter index gets an entry of each
    /// imported record, as the consumer writes one for each dead letter it
    /// makes; should they not be written, `groups` finds the index out of
    /// step and reads the queue once.
    pub async fn import(
        &self,
        records: impl IntoIterator<Item = DeadLetterRecord>,
    ) -> Result<usize, Error> {
        let queue = self.names.dead_letter_queue.clone();
        let exchange = self.names.dead_letter_exchange.clone();
        let routing_key = self.names.dead_letter_routing_key.clone();
        let channel = confirm_channel(&*self.connection, &queue).await?;
        let failed = |source| Error::Channel {
            action: "importing dead letters",
            queue: queue.clone(),
            source,
        };
        let mut in_flight = std::collections::VecDeque::new();
        let mut imported = 0;
        let mut entries = EntryWriter::new(&self.names);
        let mut index_failed = None;
        let result = async {
            channel.check_exchange(&exchange).await.map_err(|e| {
                failed(TransportError::Other(format!(
                    "the dead-letter exchange '{exchange}' is not there to route the records \
                     through ({e})"
                )))
            })?;
            let route = |confirm: Result<Confirm, TransportError>| match confirm.map_err(failed)? {
                Confirm::Ack => Ok(()),
                Confirm::Returned => Err(failed(TransportError::Other(format!(
                    "the dead-letter exchange '{exchange}' routes no queue with the key \
                     '{routing_key}': bind '{queue}' to it with that key"
                )))),
                Confirm::Nack => Err(failed(TransportError::Other(
                    "the broker did not take a message (Nack)".to_owned(),
                ))),
            };
            // Each imported record's entry, once the broker confirmed it.
            let mut confirmed = async |(pending, entry): (PendingConfirm, Option<IndexEntry>)| {
                route(pending.await)?;
                imported += 1;
                if let Some(entry) = entry
                    && index_failed.is_none()
                    && let Err(e) = entries.add(&*self.connection, entry).await
                {
                    entries.close().await;
                    index_failed = Some(e);
                }
                Ok::<(), Error>(())
            };
            for (line, record) in records.into_iter().enumerate() {
                let (properties, body) = record.message().map_err(|e| {
                    failed(TransportError::Other(format!("record {}: {e}", line + 1)))
                })?;
                let entry = index_entry(&properties, body.len());
                let pending = channel
                    .send(Publication::new(&exchange, &routing_key, &body, properties))
                    .await
                    .map_err(failed)?;
                in_flight.push_back((pending, entry));
                while in_flight.len() > IMPORT_WINDOW {
                    if let Some(next) = in_flight.pop_front() {
                        confirmed(next).await?;
                    }
                }
            }
            while let Some(next) = in_flight.pop_front() {
                confirmed(next).await?;
            }
            Ok(())
        }
        .await;
        channel.close().await;
        let written = match index_failed {
            Some(e) => Err(e),
            None => entries.finish(&*self.connection).await,
        };
        if let Err(e) = written {
            tracing::warn!(
                "{queue}: the dead-letter index's entries of the import were not written ({e}); \
                 `dlq groups` reads the queue once and leaves a checkpoint"
            );
        }
        result.map(|()| imported)
    }
}
