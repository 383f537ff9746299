//! The entries a message of the index's entries stream holds, as the
//! deliveries they stand for.
//!
//! A message whose content type is
//! [`IndexBatch::CONTENT_TYPE`](rabbit_backoff_core::IndexBatch::CONTENT_TYPE)
//! holds a batch of entries ([`IndexBatch`]), each the summary of one dead
//! letter; a reader gets, for each, a delivery with the dead letter's ids,
//! timestamp and failure headers and no body, and the body's size, so that
//! the key, the group and the filters read it as they read the message in
//! the queue. Any other message is a whole dead letter: what the broker
//! wrote to a stream bound to the dead-letter exchange before batches (an
//! index of the previous format is read as it is, once more and for as long
//! as its entries are kept; nothing needs rebuilding).

use lapin::BasicProperties;
use lapin::types::{FieldTable, ShortString};
use rabbit_backoff_core::{IndexBatch, IndexEntry};
use rabbit_backoff_runtime::toolkit::entry_header_value;
use rabbit_backoff_runtime::transport::{Acker, Delivery};

use crate::index::stream_protocol::Unsettled;

/// Calls `each` with every entry `message` holds (a message of the entries
/// stream): the delivery it stands for, and its body's size. A batch that
/// cannot be read, or an entry of it, is skipped (with a debug line): the
/// index then counts fewer dead letters than the queue holds, and the
/// count check reads the queue.
pub(crate) fn each_entry(message: &Delivery, mut each: impl FnMut(&Delivery, usize)) {
    if !is_batch(&message.properties) {
        each(message, message.data.len());
        return;
    }
    let batch = match IndexBatch::decode(&message.data) {
        Ok(batch) => batch,
        Err(e) => {
            tracing::debug!("skipping a message of the dead-letter index: {e}");
            return;
        }
    };
    for entry in &batch.entries {
        match properties_of(entry) {
            Some(properties) => each(
                &Delivery::new(Vec::new(), Acker::new(Unsettled)).with_properties(properties),
                usize::try_from(entry.body_len).unwrap_or(usize::MAX),
            ),
            None => tracing::debug!(
                "skipping an entry of the dead-letter index whose header values are not AMQP \
                 values"
            ),
        }
    }
}

/// Whether a message of the entries stream holds a batch.
fn is_batch(properties: &BasicProperties) -> bool {
    properties
        .content_type()
        .as_ref()
        .is_some_and(|t| t.as_str() == IndexBatch::CONTENT_TYPE)
}

/// The properties of the dead letter `entry` stands for, as far as it
/// keeps them; `None` when a header value is not one.
fn properties_of(entry: &IndexEntry) -> Option<BasicProperties> {
    let mut properties = BasicProperties::default();
    if let Some(id) = &entry.message_id {
        properties = properties.with_message_id(ShortString::from(id.as_str()));
    }
    if let Some(id) = &entry.correlation_id {
        properties = properties.with_correlation_id(ShortString::from(id.as_str()));
    }
    if let Some(at) = entry.timestamp {
        properties = properties.with_timestamp(at);
    }
    let mut headers = FieldTable::default();
    for (name, value) in entry.named_headers() {
        headers.insert(ShortString::from(name), entry_header_value(value)?);
    }
    if headers.inner().is_empty() {
        return Some(properties);
    }
    Some(properties.with_headers(headers))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::key_of;
    use crate::message::DeadLetterMessage;
    use lapin::types::AMQPValue;
    use rabbit_backoff_runtime::toolkit::index_entry;

    /// Dead letters of every shape their headers take: the framework's,
    /// a hand-written consumer's, one the broker made, values of other
    /// types.
    fn dead_letters() -> Vec<BasicProperties> {
        let text = |s: &str| AMQPValue::LongString(s.into());
        let mut framework = FieldTable::default();
        framework.insert("x-error".into(), text("order 17 not found"));
        framework.insert("x-failed-at".into(), text("2026-12-02T10:40:01.121Z"));
        framework.insert("x-dead-letter-reason".into(), text("permanent"));
        framework.insert("x-original-queue".into(), text("orders"));
        framework.insert("x-original-routing-key".into(), text("orders.eu"));
        framework.insert("tenant".into(), text("acme"));
        let mut death = FieldTable::default();
        death.insert("reason".into(), text("expired"));
        death.insert("count".into(), AMQPValue::LongLongInt(1));
        let deaths = AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into());
        let mut retried = framework.clone();
        retried.insert("x-retry-count".into(), AMQPValue::ShortShortInt(3));
        retried.insert("x-death".into(), deaths.clone());
        let mut by_the_broker = FieldTable::default();
        by_the_broker.insert("x-death".into(), deaths);
        let mut odd = FieldTable::default();
        odd.insert("x-dead-letter-reason".into(), AMQPValue::LongLongInt(3));
        odd.insert("x-original-queue".into(), AMQPValue::Boolean(true));
        odd.insert(
            "x-error".into(),
            AMQPValue::ByteArray(vec![0xff, 0x00].into()),
        );
        odd.insert("x-failed-at".into(), AMQPValue::Timestamp(1_700_000_000));
        odd.insert("x-retry-count".into(), AMQPValue::Double(2.5));
        [framework, retried, by_the_broker, odd]
            .into_iter()
            .map(|headers| {
                BasicProperties::default()
                    .with_message_id("m-1".into())
                    .with_correlation_id("c-1".into())
                    .with_timestamp(1_700_000_100)
                    .with_headers(headers)
            })
            .chain([BasicProperties::default()])
            .collect()
    }

    /// An entry read back from a batch gives the key and every field of the
    /// summary that groups and filters read, as the message in the queue
    /// does.
    #[test]
    fn an_entry_reads_as_the_message_it_stands_for() {
        let originals = dead_letters();
        let batch = IndexBatch {
            entries: originals
                .iter()
                .map(|p| index_entry(p, 1024).unwrap())
                .collect(),
        };
        let message = Delivery::new(batch.encode(), Acker::new(Unsettled)).with_properties(
            BasicProperties::default().with_content_type(IndexBatch::CONTENT_TYPE.into()),
        );
        let mut read = Vec::new();
        each_entry(&message, |delivery, body_len| {
            read.push((delivery.properties.clone(), body_len));
        });
        assert_eq!(read.len(), originals.len());
        for (original, (entry, body_len)) in originals.iter().zip(read) {
            assert_eq!(body_len, 1024);
            assert_eq!(key_of(&entry), key_of(original), "{original:?}");
            let queued = DeadLetterMessage::of(
                &Delivery::new(vec![b'x'; 1024], Acker::new(Unsettled))
                    .with_properties(original.clone()),
                0,
            );
            let indexed = DeadLetterMessage::of(
                &Delivery::new(Vec::new(), Acker::new(Unsettled)).with_properties(entry),
                0,
            );
            assert_eq!(
                (
                    &indexed.routing_key,
                    &indexed.original_queue,
                    indexed.retry_count,
                    &indexed.error,
                    &indexed.failed_at,
                    &indexed.reason,
                    &indexed.message_id,
                    &indexed.correlation_id,
                    &indexed.group,
                ),
                (
                    &queued.routing_key,
                    &queued.original_queue,
                    queued.retry_count,
                    &queued.error,
                    &queued.failed_at,
                    &queued.reason,
                    &queued.message_id,
                    &queued.correlation_id,
                    &queued.group,
                ),
            );
        }
    }

    #[test]
    fn a_whole_dead_letter_is_one_entry_and_a_broken_batch_none() {
        let whole = Delivery::new(vec![1, 2, 3], Acker::new(Unsettled));
        let mut seen = Vec::new();
        each_entry(&whole, |_, len| seen.push(len));
        assert_eq!(seen, [3]);
        let broken = Delivery::new(vec![1, 0xff], Acker::new(Unsettled)).with_properties(
            BasicProperties::default().with_content_type(IndexBatch::CONTENT_TYPE.into()),
        );
        each_entry(&broken, |_, len| seen.push(len));
        assert_eq!(seen, [3]);
    }
}
