//! Micro-benchmarks of the per-message work that needs no I/O: reading the
//! retry count, deciding, building the republished copy's properties and
//! headers, decoding a small JSON payload, and the frame guard's pass over
//! the bytes of each delivery and acknowledgement.
//!
//! `cargo bench --bench hot_path`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff_core::{Attempt, Delays, HeaderValue, Outcome, Policy, Verdict, decide};
use rabbit_backoff_runtime::__hot_path::{
    read_through, republish_properties, retry_count_of, write_through,
};

fn properties() -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(1));
    headers.insert("tenant".into(), AMQPValue::LongString("acme".into()));
    headers.insert(
        "trace-id".into(),
        AMQPValue::LongString("4bf92f3577b34da6a3ce929d0e0e4736".into()),
    );
    BasicProperties::default()
        .with_message_id("0b6f6f3c-1d1e-4bb4-8a53-7f6c1c3a2d11".into())
        .with_correlation_id("checkout-42".into())
        .with_content_type("application/json".into())
        .with_delivery_mode(2)
        .with_headers(headers)
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Order {
    id: u64,
    sku: String,
    quantity: u32,
}

fn hot_path(c: &mut Criterion) {
    let props = properties();
    let delays: Delays = "5s,15s,60s".parse().expect("valid delays");
    let failed = Outcome::Failed {
        verdict: Verdict::Retry,
        error: "database unavailable".into(),
    };
    let body = br#"{"id": 42, "sku": "book-0131103628", "quantity": 2}"#;

    c.bench_function("read x-retry-count", |b| {
        b.iter(|| retry_count_of(black_box(&props)))
    });
    c.bench_function("decide", |b| {
        b.iter(|| {
            decide(
                black_box(Policy::new(&delays)),
                black_box(Attempt::count(1)),
                black_box(&failed),
            )
        })
    });
    c.bench_function("republish properties (retry)", |b| {
        b.iter(|| {
            republish_properties(black_box(&props), &[("x-retry-count", HeaderValue::Int(2))])
        })
    });
    c.bench_function("decode small JSON payload", |b| {
        b.iter(|| serde_json::from_slice::<Order>(black_box(body)).expect("valid JSON"))
    });
}

/// One frame of `kind` on channel 1.
fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![kind, 0, 1];
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f.push(0xCE);
    f
}

fn short(out: &mut Vec<u8>, s: &str) {
    out.push(s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

/// The frames of one delivery as RabbitMQ sends it: `basic.deliver`, the
/// content header (lapin's own encoding of `properties`), the body.
fn delivery(tag: u64, properties: &BasicProperties, body: &[u8]) -> Vec<u8> {
    let mut method = vec![0, 60, 0, 60];
    short(&mut method, "amq.ctag-Hq0pTXGGAYDMUUsXNdtZyg");
    method.extend_from_slice(&tag.to_be_bytes());
    method.push(0);
    short(&mut method, "rbt.bench.4f1c2a9e0b7d");
    short(&mut method, "rbt.bench.4f1c2a9e0b7d");
    let (encoded, _) = cookie_factory::r#gen(
        lapin::protocol::basic::gen_properties(properties),
        Vec::new(),
    )
    .expect("encodes");
    let mut header = vec![0, 60, 0, 0];
    header.extend_from_slice(&(body.len() as u64).to_be_bytes());
    header.extend_from_slice(&encoded);
    [frame(1, &method), frame(2, &header), frame(3, body)].concat()
}

/// `basic.ack` of one delivery, as the consumer writes it.
fn ack(tag: u64) -> Vec<u8> {
    let mut method = vec![0, 60, 0, 80];
    method.extend_from_slice(&tag.to_be_bytes());
    method.push(0);
    frame(1, &method)
}

/// The frame guard over 1000 deliveries as benches/throughput's S1 gets
/// them (and over the same with the retry headers of a failed message), and
/// over the acknowledgements the consumer writes back.
fn frame_guard(c: &mut Criterion) {
    let s1 = |id: u64| {
        BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(id.to_string().into())
            .with_content_type("application/json".into())
    };
    let body = br#"{"id":4242,"kind":"Ok"}"#;
    let plain: Vec<u8> = (0..1000)
        .flat_map(|id| delivery(id, &s1(id), body))
        .collect();
    let retried: Vec<u8> = (0..1000)
        .flat_map(|id| delivery(id, &properties(), body))
        .collect();
    let mut acks = b"AMQP\x00\x00\x09\x01".to_vec();
    acks.extend((0..1000).flat_map(ack));
    println!(
        "per message: {} bytes read (S1), {} with retry headers, {} written (ack)",
        plain.len() / 1000,
        retried.len() / 1000,
        (acks.len() - 8) / 1000
    );
    let mut group = c.benchmark_group("frame guard");
    for (name, stream) in [
        ("S1 deliveries", &plain),
        ("deliveries with headers", &retried),
    ] {
        group.throughput(Throughput::Bytes(stream.len() as u64));
        for chunk in [4096, 65_536] {
            group.bench_function(format!("read {name}, {chunk}-byte reads"), |b| {
                b.iter(|| read_through(black_box(stream), chunk))
            });
        }
    }
    group.throughput(Throughput::Bytes(acks.len() as u64));
    group.bench_function("write acks, 4096-byte writes", |b| {
        b.iter(|| write_through(black_box(&acks), 4096))
    });
    group.finish();
}

criterion_group!(benches, hot_path, frame_guard);
criterion_main!(benches);
