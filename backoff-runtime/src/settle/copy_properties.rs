//! The properties of the copies the framework republishes: every original
//! header kept, its own headers set, the time stamped.

use lapin::BasicProperties;
use lapin::types::{FieldTable, ShortString};
use rabbit_backoff_core::{HeaderValue, headers, read_retry_count};

use crate::telemetry::wall_clock::Stamp;
use crate::transport::amqp_values::{PERSISTENT, amqp_value, header_view};

/// The properties of a republished copy: every original header plus `set`,
/// and `message_id`, `correlation_id`, `content_type`, `content_encoding`,
/// `type`, `app_id`, `timestamp`, `priority` and `reply_to`; always persistent.
///
/// `expiration` is dropped on purpose: a per-message TTL would silently delete
/// the copy from the dead-letter queue. `user_id` is dropped because the broker
/// refuses a `user_id` other than the publishing connection's user.
pub fn republish_properties(
    original: &BasicProperties,
    set: &[(&'static str, HeaderValue<'_>)],
) -> BasicProperties {
    copy_with(
        original,
        set.iter().map(|(name, value)| (*name, Some(value.clone()))),
    )
}

/// The properties of a dead letter of `original`: [`republish_properties`]
/// with the dead letter's headers `set` (without those it leaves out,
/// [`DeadLetter::headers`](rabbit_backoff_core::DeadLetter::headers)), and `x-first-failed-at` when
/// `original` says it only by its `x-retried-at` (a first retry copy, see
/// [`first_failed_at`]).
pub(crate) fn dead_letter_properties(
    original: &BasicProperties,
    set: &[(&'static str, Option<HeaderValue<'_>>)],
) -> BasicProperties {
    let implied = implied_first_failure(original);
    copy_with(
        original,
        set.iter()
            .cloned()
            .chain(implied.map(|at| (headers::FIRST_FAILED_AT, Some(at)))),
    )
}

/// When the message of `properties` first failed: its `x-first-failed-at`;
/// on a first retry copy, which carries none (it would say what its
/// `x-retried-at` says: it entered its tier at its first failure), its
/// `x-retried-at`. `None` before any failure.
pub(crate) fn first_failed_at(properties: &BasicProperties) -> Option<HeaderValue<'_>> {
    let table = properties.headers().as_ref()?.inner();
    match table.get(headers::FIRST_FAILED_AT) {
        Some(first) => Some(header_view(first)),
        None => implied_first_failure(properties),
    }
}

/// The `x-retried-at` of a retry copy without `x-first-failed-at`: when it
/// first failed.
fn implied_first_failure(properties: &BasicProperties) -> Option<HeaderValue<'_>> {
    let table = properties.headers().as_ref()?.inner();
    if table.contains_key(headers::FIRST_FAILED_AT) {
        return None;
    }
    let count = table.get(headers::RETRY_COUNT).map(header_view);
    if read_retry_count(count.as_ref()).count == 0 {
        return None;
    }
    table.get(headers::RETRIED_AT).map(header_view)
}

/// [`republish_properties`] with the headers of `set`: each set to its
/// value, or removed when it has none.
fn copy_with<'v>(
    original: &BasicProperties,
    set: impl IntoIterator<Item = (&'static str, Option<HeaderValue<'v>>)>,
) -> BasicProperties {
    let mut table = original.headers().clone().unwrap_or_default();
    for (name, value) in set {
        match value {
            Some(value) => {
                table.insert(ShortString::from(name), amqp_value(&value));
            }
            // Rare: the original carries a header the copy leaves out.
            None if table.contains_key(name) => {
                let mut map = table.inner().clone();
                map.remove(name);
                table = FieldTable::from(map);
            }
            None => {}
        }
    }
    let mut p = BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_headers(table);
    if let Some(v) = original.message_id() {
        p = p.with_message_id(v.clone());
    }
    if let Some(v) = original.correlation_id() {
        p = p.with_correlation_id(v.clone());
    }
    if let Some(v) = original.content_type() {
        p = p.with_content_type(v.clone());
    }
    if let Some(v) = original.content_encoding() {
        p = p.with_content_encoding(v.clone());
    }
    if let Some(v) = original.kind() {
        p = p.with_type(v.clone());
    }
    if let Some(v) = original.app_id() {
        p = p.with_app_id(v.clone());
    }
    if let Some(v) = original.timestamp() {
        p = p.with_timestamp(*v);
    }
    if let Some(v) = original.priority() {
        p = p.with_priority(*v);
    }
    if let Some(v) = original.reply_to() {
        p = p.with_reply_to(v.clone());
    }
    p
}

/// Now, RFC 3339 in UTC with milliseconds, for `x-failed-at` and `x-replayed-at`.
pub(crate) fn now_rfc3339() -> Stamp {
    Stamp::now()
}

/// The properties of a retry copy: the original's, with `x-retry-count` of
/// `next_count` and `x-retried-at` of now.
///
/// `x-first-failed-at` is written once the copy's `x-retried-at` no longer
/// says when the message first failed: a first retry copy carries none (it
/// entered its tier at its first failure, and one header fewer costs the
/// broker less on every hop: PERFORMANCE.md), the copy of a first retry
/// copy takes that copy's `x-retried-at`, and later copies keep the one
/// they carry. [`first_failed_at`] reads either.
pub(crate) fn retry_properties(original: &BasicProperties, next_count: u32) -> BasicProperties {
    let count = (headers::RETRY_COUNT, HeaderValue::Int(next_count.into()));
    // When the copy enters its tier, so that its due time can be shown.
    let now = now_rfc3339();
    let entered = (headers::RETRIED_AT, HeaderValue::Str(&now));
    match implied_first_failure(original) {
        Some(first) => copy_with(
            original,
            [count, entered, (headers::FIRST_FAILED_AT, first)].map(|(n, v)| (n, Some(v))),
        ),
        None => copy_with(original, [count, entered].map(|(n, v)| (n, Some(v)))),
    }
}

#[cfg(test)]
mod tests {
    use rabbit_backoff_core::{RetryCount, read_retry_count};

    use crate::transport::amqp_values::header_view;
    /// `x-retry-count` of `properties`, as the consumer reads it.
    fn retry_count_of(properties: &BasicProperties) -> RetryCount {
        let header = properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(headers::RETRY_COUNT))
            .map(header_view);
        read_retry_count(header.as_ref())
    }

    use super::*;
    use lapin::types::{AMQPValue, FieldTable};

    /// RabbitMQ 4.x no longer interprets `x-death` on a republished message,
    /// and a client may forge one: the count is the framework's own header.
    #[test]
    fn the_count_ignores_x_death() {
        let mut death = FieldTable::default();
        death.insert("count".into(), AMQPValue::LongLongInt(9));
        death.insert(
            "queue".into(),
            AMQPValue::LongString("orders.retry_5000ms".into()),
        );
        let deaths = AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into());
        let mut only_death = FieldTable::default();
        only_death.insert("x-death".into(), deaths.clone());
        let forged = BasicProperties::default().with_headers(only_death.clone());
        assert_eq!(retry_count_of(&forged).count, 0);

        let mut both = only_death;
        both.insert(headers::RETRY_COUNT.into(), AMQPValue::LongInt(1));
        let counted = BasicProperties::default().with_headers(both);
        assert_eq!(retry_count_of(&counted).count, 1);
        let copy = republish_properties(&counted, &[(headers::RETRY_COUNT, HeaderValue::Int(2))]);
        assert_eq!(retry_count_of(&copy).count, 2);
    }

    fn text<'p>(properties: &'p BasicProperties, name: &str) -> Option<&'p str> {
        match header_view(properties.headers().as_ref()?.inner().get(name)?) {
            HeaderValue::Str(text) => Some(text),
            _ => None,
        }
    }

    /// A first retry copy says when the message first failed by its
    /// `x-retried-at` alone; the next copy, and a dead letter of it, write
    /// that time as `x-first-failed-at`, which later copies keep.
    #[test]
    fn the_first_failure_is_written_once_the_copy_no_longer_says_it() {
        let fresh = BasicProperties::default().with_message_id("m".into());
        assert!(first_failed_at(&fresh).is_none());

        let first = retry_properties(&fresh, 1);
        assert_eq!(
            text(&first, headers::FIRST_FAILED_AT),
            None,
            "one header fewer"
        );
        let entered = text(&first, headers::RETRIED_AT)
            .expect("x-retried-at")
            .to_owned();
        assert_eq!(
            first_failed_at(&first),
            Some(HeaderValue::Str(&entered)),
            "read from x-retried-at"
        );

        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = retry_properties(&first, 2);
        assert_eq!(
            text(&second, headers::FIRST_FAILED_AT),
            Some(entered.as_str())
        );
        assert_ne!(text(&second, headers::RETRIED_AT), Some(entered.as_str()));
        let third = retry_properties(&second, 3);
        assert_eq!(
            text(&third, headers::FIRST_FAILED_AT),
            Some(entered.as_str())
        );

        let dead =
            dead_letter_properties(&first, &[(headers::ERROR, Some(HeaderValue::Str("no")))]);
        assert_eq!(
            text(&dead, headers::FIRST_FAILED_AT),
            Some(entered.as_str())
        );
        let dead_later = dead_letter_properties(&third, &[]);
        assert_eq!(
            text(&dead_later, headers::FIRST_FAILED_AT),
            Some(entered.as_str())
        );
        // A first failure dead-lettered at once: x-failed-at says it.
        let dead_at_once = dead_letter_properties(&fresh, &[]);
        assert_eq!(text(&dead_at_once, headers::FIRST_FAILED_AT), None);

        // A replayed message (no x-retry-count) keeps a stale x-retried-at,
        // which says nothing of its new first failure.
        let mut replayed = FieldTable::default();
        for (name, value) in first.headers().as_ref().expect("headers").inner() {
            if name.as_str() != headers::RETRY_COUNT {
                replayed.insert(name.clone(), value.clone());
            }
        }
        let replayed = BasicProperties::default().with_headers(replayed);
        assert!(first_failed_at(&replayed).is_none());
        assert_eq!(
            text(&retry_properties(&replayed, 1), headers::FIRST_FAILED_AT),
            None
        );
    }

    #[test]
    fn copies_identity_and_headers_and_sets_the_count() {
        let mut headers = FieldTable::default();
        headers.insert("tenant".into(), AMQPValue::LongString("acme".into()));
        headers.insert(headers::RETRY_COUNT.into(), AMQPValue::ShortShortInt(1));
        let original = BasicProperties::default()
            .with_message_id("m-1".into())
            .with_correlation_id("c-1".into())
            .with_content_type("application/json".into())
            .with_expiration("100".into())
            .with_user_id("someone".into())
            .with_priority(3)
            .with_headers(headers);
        assert_eq!(retry_count_of(&original).count, 1);

        let copy = republish_properties(&original, &[(headers::RETRY_COUNT, HeaderValue::Int(2))]);
        assert_eq!(copy.message_id().as_ref().map(|s| s.as_str()), Some("m-1"));
        assert_eq!(
            copy.correlation_id().as_ref().map(|s| s.as_str()),
            Some("c-1")
        );
        assert_eq!(
            copy.content_type().as_ref().map(|s| s.as_str()),
            Some("application/json")
        );
        assert_eq!(copy.priority(), &Some(3));
        assert_eq!(copy.delivery_mode(), &Some(PERSISTENT));
        assert_eq!(copy.expiration(), &None);
        assert_eq!(copy.user_id(), &None);
        let h = copy.headers().as_ref().unwrap().inner();
        assert_eq!(h.get("tenant"), Some(&AMQPValue::LongString("acme".into())));
        assert_eq!(retry_count_of(&copy).count, 2);
    }

    /// A dead letter leaves out the origin headers its `x-original-queue`
    /// implies, and removes those the original carried (a message
    /// dead-lettered before, imported, or forged), so that none says
    /// otherwise; the user's headers stay.
    #[test]
    fn a_dead_letter_removes_the_origin_it_leaves_out() {
        let mut inherited = FieldTable::default();
        inherited.insert(
            headers::ORIGINAL_ROUTING_KEY.into(),
            AMQPValue::LongString("elsewhere".into()),
        );
        inherited.insert(
            headers::ORIGINAL_EXCHANGE.into(),
            AMQPValue::LongString("old".into()),
        );
        inherited.insert(headers::RETRY_COUNT.into(), AMQPValue::LongLongInt(0));
        inherited.insert("tenant".into(), AMQPValue::LongString("acme".into()));
        let original = BasicProperties::default().with_headers(inherited);
        let dead_letter_from = |exchange, routing_key| {
            let dead_letter = rabbit_backoff_core::DeadLetter::new(
                rabbit_backoff_core::DeadLetterReason::Permanent,
                "no such order",
                "2026-12-05T08:00:00.000Z",
            )
            .with_origin("orders", exchange, routing_key);
            dead_letter_properties(&original, &dead_letter.headers())
        };
        let copy = dead_letter_from("orders", "orders");
        assert_eq!(text(&copy, headers::ORIGINAL_QUEUE), Some("orders"));
        assert_eq!(text(&copy, headers::ORIGINAL_ROUTING_KEY), None);
        assert_eq!(text(&copy, headers::ORIGINAL_EXCHANGE), None);
        assert_eq!(text(&copy, "tenant"), Some("acme"));
        assert!(
            !copy
                .headers()
                .as_ref()
                .unwrap()
                .contains_key(headers::RETRY_COUNT),
            "no retry tier, no count"
        );

        let copy = dead_letter_from("", "orders.eu");
        assert_eq!(
            text(&copy, headers::ORIGINAL_ROUTING_KEY),
            Some("orders.eu")
        );
        assert_eq!(text(&copy, headers::ORIGINAL_EXCHANGE), Some(""));
    }
}
