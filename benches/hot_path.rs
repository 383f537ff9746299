//! Micro-benchmarks of the per-message work that needs no I/O: reading the
//! retry count, deciding, building the republished copy's properties and
//! headers, decoding a small JSON payload.
//!
//! `cargo bench --bench hot_path`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff_core::{Attempt, Delays, HeaderValue, Outcome, Policy, Verdict, decide};
use rabbit_backoff_runtime::__hot_path::{republish_properties, retry_count_of};

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

criterion_group!(benches, hot_path);
criterion_main!(benches);
