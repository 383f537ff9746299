//! The properties of the copies the framework republishes: every original
//! header kept, its own headers set, the time stamped.

use std::collections::BTreeMap;

use lapin::BasicProperties;
use lapin::types::{FieldTable, ShortString};
use rabbit_backoff_core::{HeaderValue, annotations, headers};

use crate::settle::first_failure::{TierDelays, implied_first_failure};
use crate::telemetry::wall_clock::Stamp;
use crate::transport::amqp_values::{PERSISTENT, amqp_value, header_view};
use rabbit_backoff_core::headers::DEATH as X_DEATH;

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
/// [`DeadLetter::headers`](rabbit_backoff_core::DeadLetter::headers)), and
/// `x-first-failed-at` when `original` is a first retry copy, which carries
/// none ([`implied_first_failure`]).
pub(crate) fn dead_letter_properties(
    original: &BasicProperties,
    set: &[(&'static str, Option<HeaderValue<'_>>)],
    tiers: &TierDelays,
) -> BasicProperties {
    let set = set.iter().cloned();
    match implied_first_failure(original, tiers) {
        Some(first) => first.with_value(|at| {
            copy_with(original, set.chain([(headers::FIRST_FAILED_AT, Some(at))]))
        }),
        None => copy_with(original, set),
    }
}

/// What a dead letter of a retry the broker held back (`retry =
/// "scheduled"`) sets beside its own headers: `x-first-failed-at`, from the
/// annotation `x-opt-first-failed-at` its delivery carries, and none of the
/// annotations, which said where the retry stood and which the dead
/// letter's own headers say again.
pub(crate) fn held_annotations(
    original: &BasicProperties,
) -> impl Iterator<Item = (&'static str, Option<HeaderValue<'_>>)> {
    let first = original
        .headers()
        .as_ref()
        .and_then(|table| table.inner().get(annotations::FIRST_FAILED_AT))
        .map(header_view);
    annotations::AS_HEADERS
        .iter()
        .map(|(annotation, _)| (*annotation, None))
        .chain([(annotations::DELIVERY_TIME, None)])
        .chain(first.map(|at| (headers::FIRST_FAILED_AT, Some(at))))
}

/// [`republish_properties`] with the headers of `set`: each set to its
/// value, or removed when it has none.
fn copy_with<'v, I>(original: &BasicProperties, set: I) -> BasicProperties
where
    I: IntoIterator<Item = (&'static str, Option<HeaderValue<'v>>)>,
    I::IntoIter: Clone,
{
    let set = set.into_iter();
    let removed = |name: &str| set.clone().any(|(n, v)| v.is_none() && n == name);
    let mut table = match original.headers() {
        // The original carries a header the copy leaves out (`x-death`
        // after a tier, or an origin header a dead letter implies): the
        // table is copied without it, not copied and then rebuilt.
        Some(table)
            if set
                .clone()
                .any(|(name, value)| value.is_none() && table.contains_key(name)) =>
        {
            FieldTable::from(
                table
                    .inner()
                    .iter()
                    .filter(|(name, _)| !removed(name.as_str()))
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect::<BTreeMap<_, _>>(),
            )
        }
        Some(table) => table.clone(),
        None => FieldTable::default(),
    };
    for (name, value) in set {
        if let Some(value) = value {
            table.insert(ShortString::from(name), amqp_value(&value));
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

/// The properties of a retry copy: the original's, with `x-retry-count`
/// of `next_count`, without the original's `x-death` (the broker writes the
/// copy's own when it leaves its tier), and `x-retried-at` of now except on
/// a first copy with `stamp_first` false.
///
/// A first retry copy carries no `x-first-failed-at`: it entered its tier
/// at its first failure, which its `x-retried-at` says, or without it its
/// expiry from the tier ([`implied_first_failure`]); one header fewer costs
/// the broker less on every hop (PERFORMANCE.md). The copy of a first copy
/// writes that time as `x-first-failed-at`, and later copies keep it.
/// Dropping `x-death` keeps the broker's record of each tier fresh on
/// RabbitMQ 3.x, which would otherwise count on in an entry of an earlier
/// life (4.x ignores an `x-death` a client publishes).
pub(crate) fn retry_properties(
    original: &BasicProperties,
    next_count: u32,
    stamp_first: bool,
    tiers: &TierDelays,
) -> BasicProperties {
    let count = (
        headers::RETRY_COUNT,
        Some(HeaderValue::Int(next_count.into())),
    );
    let no_death = (X_DEATH, None);
    // When the copy enters its tier, so that its due time can be shown; not
    // on a first copy unless asked.
    let now = (stamp_first || next_count > 1).then(now_rfc3339);
    let entered = now
        .as_deref()
        .map(|now| (headers::RETRIED_AT, Some(HeaderValue::Str(now))));
    let set = [count, no_death].into_iter().chain(entered);
    match implied_first_failure(original, tiers) {
        Some(first) => first.with_value(|first| {
            copy_with(
                original,
                set.chain([(headers::FIRST_FAILED_AT, Some(first))]),
            )
        }),
        None => copy_with(original, set),
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
    use crate::settle::first_failure::{FirstFailure, first_failed_at};
    use lapin::types::AMQPValue;

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

    fn tiers() -> TierDelays {
        let spec = rabbit_backoff_core::ConsumerSpec::new("orders", "5s,60s".parse().unwrap());
        TierDelays::of(
            &rabbit_backoff_core::Topology::of(&spec),
            &spec.retry_delays(),
        )
    }

    /// `properties` as the broker delivers it back from the tier `queue`:
    /// with an `x-death` entry of its expiry at `left` (seconds), `count`
    /// times.
    fn back_from(
        properties: &BasicProperties,
        queue: &str,
        left: u64,
        count: i64,
    ) -> BasicProperties {
        let mut death = FieldTable::default();
        death.insert("count".into(), AMQPValue::LongLongInt(count));
        death.insert("reason".into(), AMQPValue::LongString("expired".into()));
        death.insert("queue".into(), AMQPValue::LongString(queue.into()));
        death.insert("time".into(), AMQPValue::Timestamp(left));
        let mut table = properties.headers().clone().unwrap_or_default();
        table.insert(
            X_DEATH.into(),
            AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into()),
        );
        properties.clone().with_headers(table)
    }

    /// Without a `max_age`, a first retry copy carries only its count; back
    /// from its tier, the broker's `x-death` says when it entered it, which
    /// the next copy and a dead letter write as `x-first-failed-at`, and
    /// later copies keep. No copy carries the `x-death` of the one before.
    #[test]
    fn a_first_copy_carries_only_its_count() {
        let tiers = tiers();
        let fresh = BasicProperties::default().with_message_id("m".into());
        let first = retry_properties(&fresh, 1, false, &tiers);
        let names: Vec<_> = first
            .headers()
            .as_ref()
            .unwrap()
            .inner()
            .keys()
            .map(|name| name.as_str())
            .collect();
        assert_eq!(names, [headers::RETRY_COUNT], "one header");

        // 2027-01-15T08:00:05Z: it left the 5 s tier.
        let back = back_from(&first, "orders.retry_5000ms", 1_800_000_005, 1);
        let second = retry_properties(&back, 2, false, &tiers);
        assert_eq!(
            text(&second, headers::FIRST_FAILED_AT),
            Some("2027-01-15T08:00:00.000Z")
        );
        assert!(
            text(&second, headers::RETRIED_AT).is_some(),
            "later copies say when they entered"
        );
        assert!(!second.headers().as_ref().unwrap().contains_key(X_DEATH));
        let third = retry_properties(
            &back_from(&second, "orders.retry_60000ms", 1_800_000_070, 1),
            3,
            false,
            &tiers,
        );
        assert_eq!(
            text(&third, headers::FIRST_FAILED_AT),
            Some("2027-01-15T08:00:00.000Z")
        );
        let dead = dead_letter_properties(&back, &[], &tiers);
        assert_eq!(
            text(&dead, headers::FIRST_FAILED_AT),
            Some("2027-01-15T08:00:00.000Z")
        );
        assert!(
            dead.headers().as_ref().unwrap().contains_key(X_DEATH),
            "a dead letter keeps the broker's record"
        );

        // Replayed after a life through the same tier, on RabbitMQ 3.x,
        // had its copy kept the old `x-death`: the entry counts 2 and keeps
        // the old time, which says nothing of this life.
        let stale = back_from(&first, "orders.retry_5000ms", 1_700_000_000, 2);
        assert!(
            text(
                &retry_properties(&stale, 2, false, &tiers),
                headers::FIRST_FAILED_AT
            )
            .is_none()
        );
    }

    /// With a `max_age`, a first retry copy says when the message first
    /// failed by its `x-retried-at`, to the millisecond; the next copy, and
    /// a dead letter of it, write that time as `x-first-failed-at`, which
    /// later copies keep.
    #[test]
    fn the_first_failure_is_written_once_the_copy_no_longer_says_it() {
        let tiers = tiers();
        let fresh = BasicProperties::default().with_message_id("m".into());
        assert!(first_failed_at(&fresh, &tiers).is_none());

        let first = retry_properties(&fresh, 1, true, &tiers);
        assert_eq!(
            text(&first, headers::FIRST_FAILED_AT),
            None,
            "one header fewer"
        );
        let entered = text(&first, headers::RETRIED_AT)
            .expect("x-retried-at")
            .to_owned();
        assert_eq!(
            first_failed_at(&first, &tiers),
            Some(FirstFailure::Written(HeaderValue::Str(&entered))),
            "read from x-retried-at"
        );
        // Back from its tier, x-retried-at still wins over x-death.
        let back = back_from(&first, "orders.retry_5000ms", 1_800_000_005, 1);

        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = retry_properties(&back, 2, true, &tiers);
        assert_eq!(
            text(&second, headers::FIRST_FAILED_AT),
            Some(entered.as_str())
        );
        assert_ne!(text(&second, headers::RETRIED_AT), Some(entered.as_str()));
        let third = retry_properties(&second, 3, true, &tiers);
        assert_eq!(
            text(&third, headers::FIRST_FAILED_AT),
            Some(entered.as_str())
        );

        let dead = dead_letter_properties(
            &back,
            &[(headers::ERROR, Some(HeaderValue::Str("no")))],
            &tiers,
        );
        assert_eq!(
            text(&dead, headers::FIRST_FAILED_AT),
            Some(entered.as_str())
        );
        let dead_later = dead_letter_properties(&third, &[], &tiers);
        assert_eq!(
            text(&dead_later, headers::FIRST_FAILED_AT),
            Some(entered.as_str())
        );
        // A first failure dead-lettered at once: x-failed-at says it.
        let dead_at_once = dead_letter_properties(&fresh, &[], &tiers);
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
        assert!(first_failed_at(&replayed, &tiers).is_none());
        assert_eq!(
            text(
                &retry_properties(&replayed, 1, true, &tiers),
                headers::FIRST_FAILED_AT
            ),
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
            dead_letter_properties(&original, &dead_letter.headers(), &tiers())
        };
        let copy = dead_letter_from("orders", "orders");
        assert_eq!(text(&copy, headers::ORIGINAL_QUEUE), Some("orders"));
        assert_eq!(text(&copy, headers::ORIGINAL_ROUTING_KEY), None);
        assert_eq!(text(&copy, headers::ORIGINAL_EXCHANGE), None);
        assert_eq!(text(&copy, "tenant"), Some("acme"));
        assert_eq!(
            copy.headers()
                .as_ref()
                .unwrap()
                .inner()
                .get(headers::RETRY_COUNT),
            Some(&AMQPValue::LongLongInt(0)),
            "no retry tier: a count of 0, written (the article's contract)"
        );

        let copy = dead_letter_from("", "orders.eu");
        assert_eq!(
            text(&copy, headers::ORIGINAL_ROUTING_KEY),
            Some("orders.eu")
        );
        assert_eq!(text(&copy, headers::ORIGINAL_EXCHANGE), Some(""));
    }
}
