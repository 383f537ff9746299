//! Replaying dead letters: each copy confirmed before its original leaves,
//! its failure moved into its history.

use crate::dlq::Dlq;
use crate::passes::report::DeadLetterReport;
use crate::passes::scan::{Mode, Sink};

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use rabbit_backoff_core::{
    FAILURE_HEADERS, HeaderValue, REPLAY_HISTORY, REPLAYED_AT, broker_headroom, headers,
    history_overflow, read_retry_count, replay_target,
};

use crate::filter::DeadLetterFilter;
use crate::passes::replay_options::ReplayOptions;

use rabbit_backoff_core::IndexEntry;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::clock::now_rfc3339;
use rabbit_backoff_runtime::toolkit::{
    CopyPublisher, Target, index_entry, link_trace, republish_properties, set_aside_reason,
};
use rabbit_backoff_runtime::transport::{Delivery, header_view};
use tracing::Instrument;

impl Dlq {
    /// Publishes each matching message to its work queue (or the target of
    /// `options`) with `x-retry-count` reset to 0 and its failure headers moved
    /// into `x-replay-history`, every other property kept; acks it from the
    /// dead-letter queue only after the broker confirmed the copy.
    pub async fn replay(
        &self,
        filter: &DeadLetterFilter,
        options: &ReplayOptions,
    ) -> Result<DeadLetterReport, Error> {
        if options.dry_run {
            return self.scan(filter, Mode::Peek, Sink::Collect).await;
        }
        self.scan(filter, Mode::Replay(options), Sink::Collect)
            .await
    }

    /// Publishes the replayed copy of `delivery`, confirmed; `Ok(Err(reason))`
    /// when no copy of it can be published, so it must stay. With the
    /// copy's entry of the dead-letter index when the copy went back to the
    /// dead-letter queue (the replay's target is its exchange and key, or
    /// the queue itself), where it is a dead letter like any other.
    pub(super) async fn republish(
        &self,
        settler: &CopyPublisher,
        delivery: &Delivery,
        options: &ReplayOptions,
        marker: Option<(&str, u64)>,
    ) -> Result<Result<Option<IndexEntry>, String>, Error> {
        if let Some(reason) = set_aside_reason(&delivery.properties) {
            return Ok(Err(reason));
        }
        let original_queue = delivery
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(headers::ORIGINAL_QUEUE))
            .and_then(|v| match header_view(v) {
                HeaderValue::Str(s) => Some(s.to_owned()),
                _ => None,
            });
        let (default_exchange, default_key) =
            replay_target(original_queue.as_deref(), &self.names.queue);
        let exchange = options.to_exchange.clone().unwrap_or(default_exchange);
        let routing_key = options.to_routing_key.clone().unwrap_or(default_key);
        let mut entry = Vec::new();
        if let Some(by) = &options.by {
            entry.push((
                ShortString::from(headers::REPLAYED_BY),
                AMQPValue::LongString(LongString::from(by.as_bytes())),
            ));
        }
        let (properties, body) = match &options.edit {
            Some(edit) => {
                let (properties, body, replaced) = edit.apply(&delivery.properties, &delivery.data);
                entry.extend(replaced);
                (properties, std::borrow::Cow::Owned(body))
            }
            None => (
                delivery.properties.clone(),
                std::borrow::Cow::Borrowed(&delivery.data[..]),
            ),
        };
        let properties = replay_properties_with(&properties, &now_rfc3339(), entry, marker);
        let target = Target {
            exchange: &exchange,
            routing_key: &routing_key,
            queue: &routing_key,
            // The copy goes to a work queue, whose dead-lettering may add x-death.
            headroom: broker_headroom(&routing_key, &exchange, &routing_key),
        };
        let properties = match settler.fit(properties, &target) {
            Ok(properties) => properties,
            Err(too_large) => {
                return Ok(Err(format!(
                    "its copy would need {} bytes of properties and headers, more than the {} \
                     allowed in a frame of {}",
                    too_large.size,
                    too_large.limit,
                    settler.frame_max()
                )));
            }
        };
        let names = &self.names;
        let to_dead_letters = (exchange == names.dead_letter_exchange
            && routing_key == names.dead_letter_routing_key)
            || (exchange.is_empty() && routing_key == names.dead_letter_queue);
        let entry = to_dead_letters
            .then(|| index_entry(&properties, body.len()))
            .flatten();
        // A replay starts a trace of its own, linked to the failure's.
        let span = tracing::info_span!(
            "replay",
            otel.name = %format_args!("{} replay", self.names.dead_letter_queue),
            otel.kind = "producer",
            messaging.system = "rabbitmq",
            messaging.destination.name = %routing_key,
        );
        link_trace(&span, delivery.properties.headers().as_ref());
        settler
            .publish(&target, &body, properties)
            .instrument(span)
            .await
            .map_err(|failure| Error::Publish {
                exchange: exchange.clone(),
                routing_key: routing_key.clone(),
                failure,
            })?;
        Ok(Ok(entry))
    }
}

/// The properties of a replayed copy: the failure headers move into one new
/// entry of `x-replay-history`, which keeps the newest
/// [`REPLAY_HISTORY_LIMIT`](rabbit_backoff_core::REPLAY_HISTORY_LIMIT) entries;
/// `x-replay-count` counts every replay; `x-retry-count` starts again at 0.
#[cfg(test)]
pub(crate) fn replay_properties(original: &BasicProperties, replayed_at: &str) -> BasicProperties {
    replay_properties_with(original, replayed_at, Vec::new(), None)
}

/// [`replay_properties`] with more fields in the new history entry (who
/// replayed it, what an edit replaced), and the marker of the replay job
/// that sends it (its id and the copy's number), if any: an earlier job's
/// marker never stays.
pub(crate) fn replay_properties_with(
    original: &BasicProperties,
    replayed_at: &str,
    more: Vec<(ShortString, AMQPValue)>,
    marker: Option<(&str, u64)>,
) -> BasicProperties {
    let mut table = original.headers().clone().unwrap_or_default();
    let mut entry = FieldTable::default();
    for name in FAILURE_HEADERS {
        if let Some(value) = table.inner().get(name) {
            entry.insert(ShortString::from(name), value.clone());
        }
    }
    entry.insert(
        ShortString::from(REPLAYED_AT),
        AMQPValue::LongString(LongString::from(replayed_at.as_bytes())),
    );
    for (name, value) in more {
        entry.insert(name, value);
    }
    let earlier: &[AMQPValue] = match table.inner().get(REPLAY_HISTORY) {
        Some(AMQPValue::FieldArray(items)) => items.as_slice(),
        _ => &[],
    };
    // Messages replayed before the count existed count their history entries.
    let replays = table
        .inner()
        .get(headers::REPLAY_COUNT)
        .map(|v| read_retry_count(Some(&header_view(v))).count)
        .unwrap_or(earlier.len() as u32)
        .max(earlier.len() as u32)
        .saturating_add(1);
    let mut history: Vec<AMQPValue> = earlier[history_overflow(earlier.len())..].to_vec();
    history.push(AMQPValue::FieldTable(entry));
    let history = FieldArray::from(history);
    let mut kept = FieldTable::default();
    for (name, value) in table.inner() {
        if !FAILURE_HEADERS.contains(&name.as_str())
            && name.as_str() != headers::REPLAY_JOB
            && name.as_str() != headers::REPLAY_SEQ
        {
            kept.insert(name.clone(), value.clone());
        }
    }
    table = kept;
    table.insert(
        ShortString::from(REPLAY_HISTORY),
        AMQPValue::FieldArray(history),
    );
    let stripped = original.clone().with_headers(table);
    let mut set = vec![
        (headers::RETRY_COUNT, HeaderValue::Int(0)),
        (REPLAYED_AT, HeaderValue::Str(replayed_at)),
        (headers::REPLAY_COUNT, HeaderValue::Int(replays.into())),
    ];
    if let Some((job, seq)) = marker {
        set.push((headers::REPLAY_JOB, HeaderValue::Str(job)));
        set.push((headers::REPLAY_SEQ, HeaderValue::Int(seq.into())));
    }
    republish_properties(&stripped, &set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_moves_the_failure_into_the_history() {
        let mut headers = FieldTable::default();
        headers.insert("x-error".into(), AMQPValue::LongString("db down".into()));
        headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(3));
        headers.insert(
            "x-dead-letter-reason".into(),
            AMQPValue::LongString("exhausted".into()),
        );
        headers.insert("tenant".into(), AMQPValue::LongString("acme".into()));
        let original = BasicProperties::default()
            .with_message_id("m".into())
            .with_headers(headers);

        let first = replay_properties(&original, "2026-01-01T00:00:00Z");
        let h = first.headers().as_ref().unwrap().inner();
        assert_eq!(h.get("x-retry-count"), Some(&AMQPValue::LongLongInt(0)));
        assert_eq!(h.get("x-error"), None);
        assert_eq!(h.get("x-dead-letter-reason"), None);
        assert_eq!(h.get("tenant"), Some(&AMQPValue::LongString("acme".into())));
        let Some(AMQPValue::FieldArray(history)) = h.get(REPLAY_HISTORY) else {
            panic!("history")
        };
        assert_eq!(history.as_slice().len(), 1);
        let Some(AMQPValue::FieldTable(entry)) = history.as_slice().first() else {
            panic!("entry")
        };
        assert_eq!(
            entry.inner().get("x-error"),
            Some(&AMQPValue::LongString("db down".into()))
        );
        assert_eq!(first.message_id().as_ref().map(|s| s.as_str()), Some("m"));

        // A second replay appends.
        let second = replay_properties(&first, "2026-01-02T00:00:00Z");
        let Some(AMQPValue::FieldArray(history)) = second
            .headers()
            .as_ref()
            .unwrap()
            .inner()
            .get(REPLAY_HISTORY)
        else {
            panic!("history")
        };
        assert_eq!(history.as_slice().len(), 2);
    }
}

#[cfg(test)]
mod marker_tests {
    use super::*;

    #[test]
    fn an_earlier_jobs_marker_is_replaced() {
        let mut headers = FieldTable::default();
        headers.insert(
            headers::REPLAY_JOB.into(),
            AMQPValue::LongString("j1".into()),
        );
        headers.insert(headers::REPLAY_SEQ.into(), AMQPValue::LongLongInt(3));
        let original = BasicProperties::default().with_headers(headers);
        let copy = replay_properties_with(&original, "now", Vec::new(), Some(("j2", 7)));
        let table = copy.headers().clone().unwrap();
        assert_eq!(
            table.inner().get(headers::REPLAY_JOB),
            Some(&AMQPValue::LongString("j2".into()))
        );
        assert_eq!(
            table.inner().get(headers::REPLAY_SEQ),
            Some(&AMQPValue::LongLongInt(7))
        );
    }
}
