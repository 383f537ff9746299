//! Hostile input: every malformed body or header leaves the consumer running,
//! and the message either handled or in the dead-letter queue with an
//! `x-error` that says what was wrong.

mod common;

use std::time::{Duration, Instant};

use common::*;
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldArray, FieldTable};
use lapin::{BasicProperties, Channel};
use rabbit_backoff::prelude::*;
use rabbit_backoff::{ConsumerSpec, HealthWatch, ShutdownHandle};
use serde::Deserialize;

const WAIT: Duration = Duration::from_secs(20);

#[derive(Debug, Deserialize)]
struct Probe {
    id: u64,
    #[serde(default)]
    fail: Option<String>,
    #[serde(default)]
    huge_error: bool,
}

#[derive(Debug, Classify)]
enum ProbeError {
    Transient(String),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ProbeError::Transient(text) = self;
        f.write_str(text)
    }
}

/// Ids handled successfully, with the retry count each was seen with.
#[derive(Default, Clone)]
struct Handled(std::sync::Arc<std::sync::Mutex<Vec<(u64, u32)>>>);

#[backoff_consumer(queue = "placeholder", delays = "50ms")]
async fn probe(message: Probe, ctx: &Context, handled: State<Handled>) -> Result<(), ProbeError> {
    if message.huge_error {
        // A megabyte of error text, as a long error chain might produce.
        return Err(ProbeError::Transient(
            "caused by: deep failure; ".repeat(40_000),
        ));
    }
    if message.fail.is_some() {
        return Err(ProbeError::Transient(format!(
            "probe {} failed",
            message.id
        )));
    }
    handled
        .0
        .lock()
        .unwrap()
        .push((message.id, ctx.retry_count()));
    Ok(())
}

async fn send(channel: &Channel, spec: &ConsumerSpec, body: &[u8], properties: BasicProperties) {
    let names = spec.names();
    publish(
        channel,
        &names.exchange,
        &names.routing_key,
        body,
        properties,
    )
    .await;
}

fn with_count(value: AMQPValue) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert("x-retry-count".into(), value);
    BasicProperties::default().with_headers(headers)
}

#[tokio::test]
async fn hostile_bodies_and_headers_are_handled_or_explained() {
    let (spec, handled, _health, shutdown, task, _cleanup) = start("hostile", probe).await;

    let (_connection, channel) = channel().await;
    channel.confirm_select(Default::default()).await.unwrap();
    let plain = BasicProperties::default();

    // Bodies that cannot be decoded: dead-lettered with the decoder's words.
    let big_garbage = vec![b'x'; 5 * 1024 * 1024];
    let undecodable: [(&str, &[u8]); 5] = [
        ("not JSON", b"hello"),
        ("wrong shape", b"{\"id\": \"one\"}"),
        ("empty", b""),
        ("not UTF-8", &[0xc3, 0x28, 0xff]),
        ("several MiB", &big_garbage),
    ];
    for (_, body) in undecodable {
        send(&channel, &spec, body, plain.clone()).await;
    }
    // A several-MiB body that decodes is handled.
    let padding = "p".repeat(4 * 1024 * 1024);
    let big_valid = format!("{{\"id\": 100, \"padding\": \"{padding}\"}}");
    let handled_or_exhausted: [(&[u8], BasicProperties); 10] = [
        (big_valid.as_bytes(), plain.clone()),
        // Odd or missing content types do not matter to JSON decoding.
        (
            b"{\"id\": 101}",
            plain.clone().with_content_type("text/plain".into()),
        ),
        (
            b"{\"id\": 102}",
            plain.clone().with_content_type("\u{1}weird".into()),
        ),
        // Odd retry counts: read tolerantly, never a crash.
        (
            b"{\"id\": 103}",
            with_count(AMQPValue::LongString("1".into())),
        ),
        (b"{\"id\": 104}", with_count(AMQPValue::Double(1.5))),
        (
            b"{\"id\": 105}",
            with_count(AMQPValue::FieldArray(FieldArray::from(vec![
                AMQPValue::LongInt(1),
            ]))),
        ),
        (b"{\"id\": 106}", with_count(AMQPValue::LongLongInt(-3))),
        (
            b"{\"id\": 107}",
            with_count(AMQPValue::LongLongInt(i64::MAX)),
        ),
        // A failing message whose count is i64::MAX has no tier left: exhausted at once.
        (
            b"{\"id\": 108, \"fail\": \"yes\"}",
            with_count(AMQPValue::LongLongInt(i64::MAX)),
        ),
        // An error of a megabyte: x-error stays bounded.
        (b"{\"id\": 109, \"huge_error\": true}", plain.clone()),
    ];
    for (body, properties) in handled_or_exhausted {
        send(&channel, &spec, body, properties).await;
    }

    eventually("the well-formed probes", WAIT, || {
        handled.0.lock().unwrap().len() == 8
    })
    .await;
    let mut seen = handled.0.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            (100, 0),
            (101, 0),
            (102, 0),
            (103, 1),
            (104, 0),
            (105, 0),
            (106, 0),
            (107, u32::MAX)
        ],
        "string counts are parsed; floats, arrays and negatives read as 0; huge ones are capped"
    );

    let dlq = spec.names().dead_letter_queue;
    let mut decode_errors = Vec::new();
    let mut others = Vec::new();
    for _ in 0..7 {
        let dead = next_message(&channel, &dlq, WAIT).await;
        let p = &dead.delivery.properties;
        let reason = header_str(p, "x-dead-letter-reason").unwrap();
        let error = header_str(p, "x-error").unwrap();
        assert!(
            error.len() <= rabbit_backoff::rules::MAX_ERROR_LEN,
            "x-error is bounded: {} bytes",
            error.len()
        );
        if reason == "decode" {
            decode_errors.push((error, dead.delivery.data.len()));
        } else {
            others.push((reason, error, header_int(p, "x-retry-count")));
        }
    }
    assert_eq!(decode_errors.len(), 5, "{decode_errors:?}");
    assert!(
        decode_errors.iter().any(|(_, len)| *len == 5 * 1024 * 1024),
        "the 5 MiB body is kept whole"
    );
    for (error, _) in &decode_errors {
        assert!(
            error.starts_with("cannot decode the body as JSON"),
            "{error}"
        );
    }
    others.sort();
    assert_eq!(others.len(), 2, "{others:?}");
    let exhausted: Vec<_> = others.iter().filter(|(r, _, _)| r == "exhausted").collect();
    assert_eq!(exhausted.len(), 2, "{others:?}");
    assert!(others.iter().any(|(_, e, _)| e == "probe 108 failed"));
    let huge = others
        .iter()
        .find(|(_, e, _)| e.starts_with("caused by"))
        .expect("the huge error");
    assert!(huge.1.ends_with("bytes truncated]"), "marked as truncated");

    assert!(!task.is_finished(), "the consumer is still running");
    shutdown.shutdown();
    task.await.unwrap().unwrap();
}

// ---------------------------------------------------------------------------
// Poison messages: a message that no copy can be made of, or whose headers
// nest thousands of levels deep, ends in the dead-letter queue without taking
// the consumer, its connection or the messages behind it down.

/// Properties whose one header, `blob`, holds `len` bytes.
fn blob(len: usize) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert("blob".into(), AMQPValue::LongString("b".repeat(len).into()));
    BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(headers)
}

/// The largest `blob` a message can carry: it then fills a 131 072-byte
/// frame to within 5 bytes (14 fixed, 1 delivery mode, 4 table length,
/// 5 for the name `blob`, 5 for the value's type and length).
const NEAR_LIMIT: usize = 131_064 - 5 - 29;

/// Publishes jobs `ids` that succeed at once, with no headers.
async fn publish_ordinary(channel: &Channel, spec: &ConsumerSpec, ids: std::ops::Range<u64>) {
    for id in ids {
        publish_job(
            channel,
            spec,
            &Job::new(id, Fail::None, None),
            BasicProperties::default(),
        )
        .await;
    }
}

async fn publish_job(
    channel: &Channel,
    spec: &ConsumerSpec,
    job: &Job,
    properties: BasicProperties,
) {
    let body = serde_json::to_vec(job).unwrap();
    send(channel, spec, &body, properties).await;
}

/// Fails with an error of 4 KiB, as a long error chain would.
#[derive(Debug, Classify)]
enum BigError {
    Transient(u64),
    #[permanent]
    Permanent(u64),
}

impl std::fmt::Display for BigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (BigError::Transient(id) | BigError::Permanent(id)) = self;
        write!(f, "job {id}: {}", "e".repeat(4096))
    }
}

#[backoff_consumer(queue = "placeholder", delays = "20ms")]
async fn big_errors(job: Job, handled: State<Handled>) -> Result<(), BigError> {
    match job.fail {
        Fail::None => {
            handled.0.lock().unwrap().push((job.id, 0));
            Ok(())
        }
        Fail::Permanent => Err(BigError::Permanent(job.id)),
        _ => Err(BigError::Transient(job.id)),
    }
}

/// A runtime with `consumer`, which records in [`Handled`], on a unique
/// queue named after `name`, once it is ready.
async fn start(
    name: &str,
    consumer: impl Consumer,
) -> (
    ConsumerSpec,
    Handled,
    HealthWatch,
    ShutdownHandle,
    tokio::task::JoinHandle<Result<(), rabbit_backoff::Error>>,
    Cleanup,
) {
    let queue = unique(name);
    let handled = Handled::default();
    let runtime = test_runtime(handled.clone())
        .consumer_with(consumer, |spec| spec.queue = queue.clone())
        .build()
        .unwrap();
    let spec = runtime.specs().next().unwrap().clone();
    let cleanup = Cleanup::of(&spec);
    let health = runtime.health();
    let shutdown = runtime.shutdown_handle();
    let task = tokio::spawn(runtime.run());
    health.wait_ready().await.expect("ready");
    (spec, handled, health, shutdown, task, cleanup)
}

#[tokio::test]
async fn oversized_messages_reach_the_dead_letter_queue_and_the_rest_flow() {
    let (spec, handled, health, shutdown, task, _cleanup) = start("poison-big", big_errors).await;
    let (_connection, channel) = channel().await;
    channel.confirm_select(Default::default()).await.unwrap();

    let oversized = [
        // 126 KiB of headers and a 4 KiB error: the copies fit once x-error is cut.
        (1, Fail::Permanent, 126 * 1024),
        (2, Fail::Transient, 126 * 1024),
        // Headers that fill the frame: no copy with them fits, and the broker's
        // own dead-lettering (adding x-death) would not fit either.
        (3, Fail::Permanent, NEAR_LIMIT),
        (4, Fail::Transient, NEAR_LIMIT),
    ];
    for (id, fail, headers) in oversized {
        publish_job(&channel, &spec, &Job::new(id, fail, None), blob(headers)).await;
    }
    let started = Instant::now();
    publish_ordinary(&channel, &spec, 10..210).await;
    eventually("the 200 ordinary messages", Duration::from_secs(5), || {
        handled.0.lock().unwrap().len() == 200
    })
    .await;
    println!(
        "200 messages behind the oversized ones handled in {:?}",
        started.elapsed()
    );

    let dlq = spec.names().dead_letter_queue;
    let mut dead = std::collections::BTreeMap::new();
    for _ in 0..4 {
        let message = next_message(&channel, &dlq, WAIT).await;
        let job: Job = serde_json::from_slice(&message.delivery.data).expect("the body is intact");
        dead.insert(job.id, message.delivery.properties.clone());
    }
    assert_eq!(dead.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
    for (id, reason) in [(1, "permanent"), (2, "exhausted")] {
        let p = &dead[&id];
        assert_eq!(
            header_str(p, "blob").map(|b| b.len()),
            Some(126 * 1024),
            "job {id} keeps its headers"
        );
        assert_eq!(
            header_str(p, "x-dead-letter-reason").as_deref(),
            Some(reason)
        );
        let error = header_str(p, "x-error").unwrap();
        assert!(
            error.starts_with(&format!("job {id}: eee")),
            "job {id}: {error:.40}"
        );
        assert!(
            error.ends_with("bytes truncated]") && error.len() < 4096,
            "job {id}: x-error was cut to fit"
        );
        assert!(encoded_len(p) <= 131_064);
    }
    for id in [3, 4] {
        let p = &dead[&id];
        assert_eq!(
            header_str(p, "x-dead-letter-reason").as_deref(),
            Some("oversized"),
            "job {id}"
        );
        assert_eq!(
            header_str(p, "blob"),
            None,
            "job {id}: the header that could not fit is left out"
        );
        let Some(AMQPValue::FieldArray(dropped)) = header(p, "x-dropped-headers") else {
            panic!("job {id}: x-dropped-headers");
        };
        assert_eq!(
            dropped.as_slice(),
            [AMQPValue::LongString(
                format!("blob ({} bytes)", NEAR_LIMIT + 10).into()
            )]
        );
        let error = header_str(p, "x-error").unwrap();
        assert!(
            error.contains("too close to the frame") && error.contains(&format!("job {id}: eee")),
            "{error:.300}"
        );
    }
    assert_eq!(health.reconnects(), 0, "the connection never closed");
    assert!(!task.is_finished());
    shutdown.shutdown();
    task.await.unwrap().unwrap();
}

/// The encoded size of a message's properties, headers included, by the
/// AMQP client's own encoder, with the content header's fixed 12 bytes.
fn encoded_len(properties: &BasicProperties) -> usize {
    let encode = lapin::protocol::basic::gen_properties(properties);
    let (_, len) = cookie_factory::r#gen(encode, Vec::new()).expect("encodes");
    12 + len as usize
}

#[tokio::test]
async fn a_message_replayed_fifty_times_keeps_its_headers_bounded() {
    // Each round: a retry copy, then an exhausted dead letter with a 4 KiB
    // error, then a replay.
    let (spec, _handled, health, shutdown, task, _cleanup) =
        start("poison-replayed", big_errors).await;
    let (_connection, channel) = channel().await;
    channel.confirm_select(Default::default()).await.unwrap();
    publish_job(
        &channel,
        &spec,
        &Job::new(1, Fail::Transient, None),
        BasicProperties::default(),
    )
    .await;
    let dlq_name = spec.names().dead_letter_queue;
    let dlq = rabbit_backoff::dead_letters::Dlq::connect(&url(), &spec)
        .await
        .unwrap();
    let all = rabbit_backoff::dead_letters::DeadLetterFilter::default();
    for round in 1..=50 {
        let deadline = Instant::now() + WAIT;
        while depth(&channel, &dlq_name).await == 0 {
            assert!(
                Instant::now() < deadline,
                "round {round}: back in the DLQ within {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let report = dlq.replay(&all, &Default::default()).await.unwrap();
        assert_eq!(report.matched.len(), 1, "round {round}");
        assert!(
            report.skipped.is_empty(),
            "round {round}: {:?}",
            report.skipped
        );
    }
    let last = next_message(&channel, &dlq_name, WAIT).await;
    let p = &last.delivery.properties;
    let Some(AMQPValue::FieldArray(history)) = header(p, "x-replay-history") else {
        panic!("a replay history");
    };
    assert_eq!(
        history.as_slice().len(),
        rabbit_backoff::rules::REPLAY_HISTORY_LIMIT
    );
    assert_eq!(header_int(p, "x-replay-count"), Some(50));
    assert_eq!(
        header_str(p, "x-dead-letter-reason").as_deref(),
        Some("exhausted")
    );
    let size = encoded_len(p);
    println!("after 50 replays: {size} bytes of properties and headers");
    assert!(size < 64 * 1024, "headers stay bounded: {size} bytes");
    assert_eq!(health.reconnects(), 0);
    dlq.close().await;
    shutdown.shutdown();
    task.await.unwrap().unwrap();
}

/// Properties whose headers are `{"deep": value}` and `{"id": id}`, given
/// as the runtime's connection takes them: the flat header that stands for
/// headers too deep for lapin, which the connection writes out as the
/// headers themselves.
fn deep_properties(id: u64, value: &[u8]) -> BasicProperties {
    let mut entries = vec![4];
    entries.extend_from_slice(b"deep");
    entries.extend_from_slice(value);
    entries.extend_from_slice(&[2, b'i', b'd', b'l']);
    entries.extend_from_slice(&id.to_be_bytes());
    rabbit_backoff_test_support::deep_headers::properties(id, &entries)
}

/// Every message in `dlq` as operators see it, with the entries of its
/// headers table (name, depth, encoded value) when the connection set them
/// aside: read without lapin ever parsing a deep one.
async fn dead_letter_headers(
    dlq: &rabbit_backoff::dead_letters::Dlq,
) -> Vec<(
    rabbit_backoff::dead_letters::DeadLetterMessage,
    Vec<rabbit_backoff::rules::deep_headers::Entry>,
)> {
    let mut seen = Vec::new();
    let mut collect =
        |delivery: &rabbit_backoff::transport::Delivery,
         message: &rabbit_backoff::dead_letters::DeadLetterMessage| {
            let entries = match header(
                &delivery.properties,
                rabbit_backoff::rules::headers::DEEP_HEADERS,
            ) {
                Some(AMQPValue::ByteArray(packed)) => {
                    rabbit_backoff::rules::deep_headers::entries(packed.as_slice())
                        .expect("packed headers")
                }
                _ => Vec::new(),
            };
            seen.push((message.clone(), entries));
            Ok(())
        };
    dlq.visit(&Default::default(), &mut collect).await.unwrap();
    seen
}

#[tokio::test]
async fn deeply_nested_headers_crash_neither_the_consumer_nor_a_peek() {
    use rabbit_backoff::transport::{Confirm, Connection as _, Publication};

    let running = Running::start("poison-deep", |_| {}).await;
    let spec = running.spec.clone();
    let names = spec.names();
    // The deepest of these fill most of a 131 072-byte frame.
    let shapes = [
        (1_000, false),
        (5_000, false),
        (18_000, false),
        (25_000, true),
    ];
    let values: Vec<Vec<u8>> = shapes
        .iter()
        .map(|&(levels, arrays)| rabbit_backoff_test_support::deep_headers::value(levels, arrays))
        .collect();
    let framework = rabbit_backoff::transport::AmqpTransport::new(url())
        .connect_amqp()
        .await
        .expect("the framework connects");
    let publishing = framework.open_channel().await.unwrap();
    for (id, value) in (1u64..).zip(&values) {
        let body = serde_json::to_vec(&Job::new(id, Fail::None, None)).unwrap();
        let confirm = publishing
            .publish(Publication::new(
                &names.exchange,
                &names.routing_key,
                &body,
                deep_properties(id, value),
            ))
            .await
            .unwrap();
        assert_eq!(confirm, Confirm::Ack);
    }
    let (_connection, channel) = channel().await;
    channel.confirm_select(Default::default()).await.unwrap();
    publish_ordinary(&channel, &spec, 10..110).await;
    eventually("the messages behind the deep ones", WAIT, || {
        (10..110).all(|id| !running.journal.calls_for(id).is_empty())
    })
    .await;
    let dlq_name = names.dead_letter_queue.clone();
    let deadline = Instant::now() + WAIT;
    while depth(&channel, &dlq_name).await < 4 {
        assert!(Instant::now() < deadline, "the deep messages reach the DLQ");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    for id in 1..=4 {
        assert!(
            running.journal.calls_for(id).is_empty(),
            "the handler never saw {id}"
        );
    }
    assert_eq!(running.health.reconnects(), 0);
    assert!(!running.task.is_finished(), "the consumer is still running");

    // In the dead-letter queue, each has its headers as they were sent, byte
    // for byte, with the broker's x-death beside them.
    type Seen = (
        rabbit_backoff::dead_letters::DeadLetterMessage,
        Vec<rabbit_backoff::rules::deep_headers::Entry>,
    );
    let id_of = |seen: &Seen| seen.0.message_id.clone().unwrap_or_default();
    let intact = |seen: &[Seen]| {
        for (id, value) in (1u64..).zip(&values) {
            let (_, entries) = seen
                .iter()
                .find(|s| id_of(s) == format!("deep-{id}"))
                .unwrap_or_else(|| panic!("deep-{id} is in the dead-letter queue"));
            let deep = entries.iter().find(|e| e.name == "deep").expect("deep");
            assert!(deep.value == *value, "deep-{id}'s header is intact");
            assert_eq!(deep.depth, shapes[id as usize - 1].0 - 1);
            let id_header = entries.iter().find(|e| e.name == "id").expect("id");
            assert_eq!(id_header.value[1..], id.to_be_bytes());
            assert!(entries.iter().any(|e| e.name == "x-death"), "x-death");
        }
    };
    // Reading them back (what `rabbit-backoff dlq peek` does) crashes nothing
    // and shows every header but the deep one, which gets a note.
    let dlq = rabbit_backoff::dead_letters::Dlq::connect(&url(), &spec)
        .await
        .unwrap();
    let before = dead_letter_headers(&dlq).await;
    assert_eq!(before.len(), 4);
    intact(&before);
    for (message, _) in &before {
        let deep = &message.headers["deep"];
        assert!(
            deep.contains("not shown") && deep.contains("levels deep"),
            "{deep}"
        );
        assert!(message.headers["x-death"].contains("rejected"));
        assert!(message.headers.contains_key("id"));
    }
    // A replay leaves them where they are, saying why.
    let report = dlq
        .replay(&Default::default(), &Default::default())
        .await
        .unwrap();
    assert_eq!(report.matched.len(), 0);
    assert_eq!(report.skipped.len(), 4);
    assert!(
        report.skipped[0].reason.contains("levels deep"),
        "{}",
        report.skipped[0].reason
    );
    assert_eq!(report.kept, 4);

    // A pass longer than its window moves every message to the back of the
    // queue by publishing a copy: the deep ones come round intact, in their
    // order. An export skips them, saying why.
    const FILLERS: u64 = 1_100;
    for id in 0..FILLERS {
        channel
            .basic_publish(
                "".into(),
                dlq_name.as_str().into(),
                BasicPublishOptions::default(),
                b"{}",
                BasicProperties::default().with_message_id(format!("filler-{id}").into()),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let mut exported = Vec::new();
    let report = dlq
        .export(&Default::default(), &mut exported)
        .await
        .unwrap();
    assert_eq!(report.exported, FILLERS as usize);
    assert_eq!(report.skipped.len(), 4);
    assert!(report.skipped[0].reason.contains("levels deep"));
    let seen = dead_letter_headers(&dlq).await;
    assert_eq!(seen.len(), 4 + FILLERS as usize);
    let ids = |seen: &[Seen]| seen.iter().map(id_of).collect::<Vec<_>>();
    assert_eq!(ids(&seen[..4]), ids(&before), "the order is kept");
    intact(&seen);
    dlq.close().await;
    framework.close().await;
    let _cleanup = running.stop().await;
}
