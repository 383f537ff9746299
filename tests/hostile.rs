//! Hostile input: every malformed body or header leaves the consumer running,
//! and the message either handled or in the dead-letter queue with an
//! `x-error` that says what was wrong.

mod common;

use std::time::Duration;

use common::*;
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldArray, FieldTable};
use lapin::{BasicProperties, Channel};
use rabbit_backoff::ConsumerSpec;
use rabbit_backoff::prelude::*;
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
    channel
        .basic_publish(
            names.exchange.as_str().into(),
            names.routing_key.as_str().into(),
            BasicPublishOptions::default(),
            body,
            properties,
        )
        .await
        .expect("publish")
        .await
        .expect("confirm");
}

fn with_count(value: AMQPValue) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert("x-retry-count".into(), value);
    BasicProperties::default().with_headers(headers)
}

#[tokio::test]
async fn hostile_bodies_and_headers_are_handled_or_explained() {
    let queue = unique("hostile");
    let handled = Handled::default();
    let runtime = Runtime::builder()
        .uri(url())
        .state(handled.clone())
        .handle_signals(false)
        .consumer_with(probe, |spec| spec.queue = queue.clone())
        .build()
        .unwrap();
    let spec = runtime.specs().next().unwrap().clone();
    let _cleanup = Cleanup::of(&spec);
    let health = runtime.health();
    let shutdown = runtime.shutdown_handle();
    let task = tokio::spawn(runtime.run());
    health.wait_ready().await.expect("ready");

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
    send(&channel, &spec, big_valid.as_bytes(), plain.clone()).await;
    // Odd or missing content types do not matter to JSON decoding.
    send(
        &channel,
        &spec,
        b"{\"id\": 101}",
        plain.clone().with_content_type("text/plain".into()),
    )
    .await;
    send(
        &channel,
        &spec,
        b"{\"id\": 102}",
        plain.clone().with_content_type("\u{1}weird".into()),
    )
    .await;
    // Odd retry counts: read tolerantly, never a crash.
    send(
        &channel,
        &spec,
        b"{\"id\": 103}",
        with_count(AMQPValue::LongString("1".into())),
    )
    .await;
    send(
        &channel,
        &spec,
        b"{\"id\": 104}",
        with_count(AMQPValue::Double(1.5)),
    )
    .await;
    send(
        &channel,
        &spec,
        b"{\"id\": 105}",
        with_count(AMQPValue::FieldArray(FieldArray::from(vec![
            AMQPValue::LongInt(1),
        ]))),
    )
    .await;
    send(
        &channel,
        &spec,
        b"{\"id\": 106}",
        with_count(AMQPValue::LongLongInt(-3)),
    )
    .await;
    send(
        &channel,
        &spec,
        b"{\"id\": 107}",
        with_count(AMQPValue::LongLongInt(i64::MAX)),
    )
    .await;
    // A failing message whose count is i64::MAX has no tier left: exhausted at once.
    send(
        &channel,
        &spec,
        b"{\"id\": 108, \"fail\": \"yes\"}",
        with_count(AMQPValue::LongLongInt(i64::MAX)),
    )
    .await;
    // An error of a megabyte: x-error stays bounded.
    send(
        &channel,
        &spec,
        b"{\"id\": 109, \"huge_error\": true}",
        plain.clone(),
    )
    .await;

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
            error.len() <= rabbit_backoff::MAX_ERROR_LEN,
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
