//! The article's dead-letter contract, checked end to end on every kind of
//! dead letter the framework makes: whatever its `x-dead-letter-reason`
//! (`permanent`, `exhausted`, `decode`, `oversized`, `expired`), a dead
//! letter carries `x-retry-count` (an integer, 0 included), `x-error` (the
//! error text, never empty) and `x-failed-at` (an RFC 3339 time) as AMQP
//! headers.
//!
//! Each case runs against the real RabbitMQ at `AMQP_URL`
//! (`cargo test --test article_headers rabbitmq`; scripts/test.sh runs the
//! binary on 3.10 and, with `scripts/broker.sh env 4.3`, on 4.3) and against
//! the in-memory broker of `rabbit_backoff::testing` on tokio's paused clock
//! (`cargo test --test article_headers in_memory`). The in-memory broker
//! negotiates RabbitMQ's default frame size, so the `oversized` cases run on
//! it too. A broker that does not answer fails the test.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::seam::OnBroker;
use common::*;
use rabbit_backoff::lapin::BasicProperties;
use rabbit_backoff::lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff::prelude::*;
use rabbit_backoff::transport::{AmqpTransport, Delivery, Transport};
use rabbit_backoff::{Consumer, ConsumerSpec};

/// How far below the frame's limit an oversized message's content header
/// ends: too close for the broker to add `x-death` (it would need a few
/// hundred bytes), as tests/hostile.rs builds its poison messages.
const SLACK: usize = 5;

/// Fails transiently every time; dead-letters a message (`expired`) once its
/// first failure is older than `max_age`, which its second delivery, after
/// the 300 ms tier, always is.
#[backoff_consumer(queue = "placeholder", delays = "300ms,400ms", max_age = "200ms")]
async fn aging_job(job: Job, ctx: &Context, journal: State<Journal>) -> Result<(), JobError> {
    journal.0.lock().unwrap().push(Seen::of(job.id, ctx));
    Err(JobError::Unavailable(job.id))
}

/// A broker to run the cases against: its transport, and whether what a
/// case declares must be deleted afterwards (the shared, real broker).
struct Backend {
    transport: Arc<dyn Transport>,
    shared: bool,
}

impl Backend {
    fn rabbitmq() -> Self {
        Backend {
            transport: Arc::new(AmqpTransport::new(url())),
            shared: true,
        }
    }

    fn in_memory() -> Self {
        Backend {
            transport: Arc::new(rabbit_backoff::testing::TestBroker::new()),
            shared: false,
        }
    }

    /// `consumer` on a unique queue named after `name`, with `journal` as
    /// its state; what it declares on the real broker is deleted when the
    /// returned [`OnBroker`] is dropped, even after a failed assertion.
    async fn start<C: Consumer>(
        &self,
        name: &str,
        consumer: C,
        journal: &Journal,
        configure: impl FnOnce(&mut ConsumerSpec),
    ) -> OnBroker {
        let queue = unique(name);
        let builder = Runtime::builder()
            .state(journal.clone())
            .consumer_with(consumer, |spec| {
                spec.queue = queue.clone();
                configure(spec);
            });
        OnBroker::start(Arc::clone(&self.transport), self.shared, builder).await
    }

    /// The longest content header a message can have on this broker: the
    /// negotiated frame size less the frame's own bytes.
    async fn header_limit(&self) -> usize {
        let connection = self.transport.connect().await.expect("connect");
        let frame_max = connection.frame_max();
        connection.close().await;
        rabbit_backoff_core::header_limit(frame_max)
    }
}

fn props() -> BasicProperties {
    BasicProperties::default().with_delivery_mode(2)
}

fn with_retry_count(count: AMQPValue) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert("x-retry-count".into(), count);
    props().with_headers(headers)
}

/// The encoded size of a content header with `properties`, by the AMQP
/// client's own encoder (its fixed 12 bytes of class, weight and body size
/// included).
fn content_header_len(properties: &BasicProperties) -> usize {
    let encode = rabbit_backoff::lapin::protocol::basic::gen_properties(properties);
    let (_, len) = cookie_factory::r#gen(encode, Vec::new()).expect("encodes");
    12 + len as usize
}

/// `properties` with one more header, `blob`, long enough that the content
/// header ends [`SLACK`] bytes below `limit`: the message can be published,
/// but no copy of it with the framework's headers fits a frame, and the
/// broker could not dead-letter it either.
fn filling(properties: BasicProperties, limit: usize) -> BasicProperties {
    let with_blob = |len: usize| {
        let mut headers = properties.headers().clone().unwrap_or_default();
        headers.insert("blob".into(), AMQPValue::LongString("b".repeat(len).into()));
        properties.clone().with_headers(headers)
    };
    let empty = content_header_len(&with_blob(0));
    let filled = with_blob(limit - SLACK - empty);
    assert_eq!(content_header_len(&filled), limit - SLACK);
    filled
}

/// `properties`' headers, readable: each name with its text (cut to 80
/// characters) or other value, for a failure's message.
fn names_and_values(properties: &BasicProperties) -> String {
    let Some(headers) = properties.headers() else {
        return "no headers".to_owned();
    };
    let entries: Vec<String> = headers
        .inner()
        .iter()
        .map(|(name, value)| match value {
            AMQPValue::LongString(text) => {
                let text = String::from_utf8_lossy(text.as_bytes());
                format!("{name} = {:?}", text.chars().take(80).collect::<String>())
            }
            other => format!("{name} = {:.80}", format!("{other:?}")),
        })
        .collect();
    entries.join(", ")
}

/// Asserts the article's three headers on `dead`, and its reason:
/// `x-retry-count` an integer (of any AMQP width) equal to `retry_count`,
/// `x-error` a non-empty string containing `error_has`, `x-failed-at` an
/// RFC 3339 time, `x-dead-letter-reason` equal to `reason`.
fn assert_article_headers(dead: &Delivery, reason: &str, retry_count: i64, error_has: &str) {
    let p = &dead.properties;
    let all = || names_and_values(p);
    assert_eq!(
        header_str(p, "x-dead-letter-reason").as_deref(),
        Some(reason),
        "x-dead-letter-reason; headers: {}",
        all()
    );
    assert!(
        header(p, "x-retry-count").is_some(),
        "a {reason} dead letter without x-retry-count; headers: {}",
        all()
    );
    assert_eq!(
        header_int(p, "x-retry-count"),
        Some(retry_count),
        "x-retry-count of a {reason} dead letter (an integer): {:?}",
        header(p, "x-retry-count")
    );
    let error = header_str(p, "x-error")
        .unwrap_or_else(|| panic!("a {reason} dead letter without x-error text: {}", all()));
    assert!(
        !error.is_empty(),
        "an empty x-error on a {reason} dead letter"
    );
    assert!(
        error.contains(error_has),
        "x-error of a {reason} dead letter says {error_has:?}: {error:.300}"
    );
    let failed_at = header_str(p, "x-failed-at")
        .unwrap_or_else(|| panic!("a {reason} dead letter without x-failed-at: {}", all()));
    if let Err(e) = humantime::parse_rfc3339(&failed_at) {
        panic!("x-failed-at of a {reason} dead letter is not RFC 3339: {failed_at:?} ({e})");
    }
}

/// A handler that returns its `#[permanent]` variant (`JobError::Invalid`)
/// on the first attempt: dead-lettered at once as `permanent`, with a count
/// of 0.
async fn permanent_on_the_first_attempt(backend: Backend) {
    let journal = Journal::default();
    let on = backend
        .start("art-permanent", process_job, &journal, |_| {})
        .await;
    on.publish_json(&Job::new(1, Fail::Permanent, None), props())
        .await;
    let dead = on.next_dead_letter().await;
    assert_article_headers(&dead, "permanent", 0, "job 1 is invalid");
    assert_eq!(journal.calls_for(1).len(), 1, "handled once");
    on.stop().await;
}

/// A handler that fails transiently every time, on a ladder of two short
/// tiers (100 ms, 200 ms): dead-lettered as `exhausted` after both, with a
/// count of 2.
async fn exhausted_after_every_tier(backend: Backend) {
    let journal = Journal::default();
    let on = backend
        .start("art-exhausted", process_job, &journal, |s| {
            s.delays = "100ms,200ms".parse().unwrap();
        })
        .await;
    on.publish_json(&Job::new(2, Fail::Transient, None), props())
        .await;
    let dead = on.next_dead_letter().await;
    assert_article_headers(&dead, "exhausted", 2, "dependency unavailable (job 2)");
    let counts: Vec<u32> = journal.calls_for(2).iter().map(|s| s.retry_count).collect();
    assert_eq!(counts, [0, 1, 2], "the first attempt and one per tier");
    on.stop().await;
}

/// A fresh message whose body is not JSON for the payload type:
/// dead-lettered as `decode` without reaching the handler, with a count of 0.
async fn undecodable_on_the_first_attempt(backend: Backend) {
    let journal = Journal::default();
    let on = backend
        .start("art-decode", process_job, &journal, |_| {})
        .await;
    on.publish_raw(b"not json", props()).await;
    let dead = on.next_dead_letter().await;
    assert_article_headers(&dead, "decode", 0, "");
    assert_eq!(dead.data, b"not json", "the body as it came");
    assert!(journal.calls().is_empty(), "never handled");
    on.stop().await;
}

/// A body that is not a valid job, arriving with an `x-retry-count` of 2
/// (as a message back from its second tier, or replayed, carries): the
/// framework reads the count before it decodes the body and keeps it, so
/// the `decode` dead letter says 2.
async fn undecodable_after_two_tiers(backend: Backend) {
    let journal = Journal::default();
    let on = backend
        .start("art-decode-2", process_job, &journal, |_| {})
        .await;
    on.publish_raw(
        br#"{"id": 4, "fail": "sometimes"}"#,
        with_retry_count(AMQPValue::LongInt(2)),
    )
    .await;
    let dead = on.next_dead_letter().await;
    assert_article_headers(&dead, "decode", 2, "");
    assert!(journal.calls().is_empty(), "never handled");
    on.stop().await;
}

/// Asserts what makes `dead` an `oversized` dead letter rather than any
/// other: the header that could not fit (`blob`) is left out, and
/// `x-dropped-headers` names it.
fn assert_dropped_blob(dead: &Delivery) {
    let p = &dead.properties;
    assert_eq!(
        header(p, "blob"),
        None,
        "the header that cannot fit is left out"
    );
    let Some(AMQPValue::FieldArray(dropped)) = header(p, "x-dropped-headers") else {
        panic!("x-dropped-headers: {:?}", p.headers());
    };
    let [AMQPValue::LongString(named)] = dropped.as_slice() else {
        panic!("one header dropped: {dropped:?}");
    };
    assert!(
        String::from_utf8_lossy(named.as_bytes()).starts_with("blob ("),
        "{named:?}"
    );
}

/// A fresh message whose own headers fill the frame to within a few bytes,
/// failing permanently: no copy with its headers fits, and the broker could
/// not add `x-death` to it either, so the framework dead-letters a copy
/// without them as `oversized`, with a count of 0.
async fn oversized_on_the_first_attempt(backend: Backend) {
    let limit = backend.header_limit().await;
    let journal = Journal::default();
    let on = backend
        .start("art-oversized", process_job, &journal, |_| {})
        .await;
    on.publish_json(&Job::new(5, Fail::Permanent, None), filling(props(), limit))
        .await;
    let dead = on.next_dead_letter().await;
    assert_article_headers(&dead, "oversized", 0, "too close to the frame");
    assert_dropped_blob(&dead);
    let job: Job = serde_json::from_slice(&dead.data).expect("the body is intact");
    assert_eq!(job.id, 5);
    on.stop().await;
}

/// The same, for a message back from its first tier (`x-retry-count` of 1)
/// that fails transiently again: its retry copy cannot fit either, and the
/// `oversized` dead letter keeps the count it arrived with, 1.
async fn oversized_after_a_tier(backend: Backend) {
    let limit = backend.header_limit().await;
    let journal = Journal::default();
    let on = backend
        .start("art-oversized-1", process_job, &journal, |_| {})
        .await;
    let properties = filling(with_retry_count(AMQPValue::LongLongInt(1)), limit);
    on.publish_json(&Job::new(6, Fail::Transient, None), properties)
        .await;
    let dead = on.next_dead_letter().await;
    assert_article_headers(&dead, "oversized", 1, "dependency unavailable (job 6)");
    assert_dropped_blob(&dead);
    assert_eq!(journal.calls_for(6).len(), 1, "handled once, at count 1");
    on.stop().await;
}

/// A fresh message whose headers leave room for a dead letter but not for a
/// retry copy, failing transiently: its first tier would add `x-death` to
/// the copy when it dead-letters it back, and the copy with the room for
/// that (the headroom the runtime keeps for the tier, by
/// `rabbit_backoff_core::broker_headroom`) is 23 bytes too large, by its
/// `x-retry-count`. It is still dead-lettered by the framework as
/// `oversized`, with a count of 0, not rejected into the dead-letter queue
/// with none of the article's headers.
async fn oversized_for_a_tier_but_not_for_a_dead_letter(backend: Backend) {
    let limit = backend.header_limit().await;
    let journal = Journal::default();
    let on = backend
        .start("art-oversized-tier", process_job, &journal, |_| {})
        .await;
    let names = on.spec.names();
    let tier = names.retry_queue(on.spec.retry_delays()[0]);
    let headroom = rabbit_backoff_core::broker_headroom(&tier, &names.retry_exchange, &tier);
    let properties = filling(props(), limit - headroom + SLACK);
    on.publish_json(&Job::new(8, Fail::Transient, None), properties)
        .await;
    let dead = on.next_dead_letter().await;
    assert_article_headers(&dead, "oversized", 0, "dependency unavailable (job 8)");
    assert_eq!(journal.calls_for(8).len(), 1, "handled once, never retried");
    on.stop().await;
}

/// A consumer declared with `max_age = "200ms"` (and tiers of 300 and
/// 400 ms) whose handler keeps failing transiently: the first failure sends
/// the message to the 300 ms tier; when it comes back its first failure is
/// older than 200 ms, and it is dead-lettered as `expired` with the count
/// of the one tier it went through, 1.
async fn expired_past_max_age(backend: Backend) {
    let journal = Journal::default();
    let on = backend
        .start("art-expired", aging_job, &journal, |_| {})
        .await;
    assert_eq!(on.spec.max_age, Some(Duration::from_millis(200)));
    on.publish_json(&Job::new(7, Fail::Transient, None), props())
        .await;
    let dead = on.next_dead_letter().await;
    assert_article_headers(&dead, "expired", 1, "dependency unavailable (job 7)");
    let counts: Vec<u32> = journal.calls_for(7).iter().map(|s| s.retry_count).collect();
    assert_eq!(counts, [0, 1], "failed, retried once, then too old");
    on.stop().await;
}

on_every_broker!(
    permanent_on_the_first_attempt,
    exhausted_after_every_tier,
    undecodable_on_the_first_attempt,
    undecodable_after_two_tiers,
    oversized_on_the_first_attempt,
    oversized_after_a_tier,
    oversized_for_a_tier_but_not_for_a_dead_letter,
    expired_past_max_age,
);
