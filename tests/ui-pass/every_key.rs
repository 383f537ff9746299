use rabbit_backoff::prelude::*;
use rabbit_backoff::{DeadLetterIndex, DeclareMode, DedupeKey, ExchangeKind, QueueType, RetryBackend, RetryReturn};

#[derive(Debug, serde::Deserialize)]
pub struct Order {
    pub id: u64,
}

#[derive(Debug, thiserror::Error, Classify)]
pub enum OrderError {
    #[error("unavailable")]
    Unavailable,
    #[permanent]
    #[error("invalid: {0}")]
    Invalid(String),
}

pub struct Db;

/// Handles orders.
#[backoff_consumer(
    queue = "work_queue",
    delays = "500ms,5s,1m,1h",
    prefetch = 50,
    concurrency = 8,
    exchange = "work_exchange",
    exchange_type = "topic",
    routing_key = "work",
    retry_exchange = "retry_exchange",
    retry_queue = "retry_{ms}ms",
    dead_letter_exchange = "dlx_exchange",
    dead_letter_queue = "dead_letter_queue",
    dead_letter_routing_key = "dead",
    retry_return = "exchange",
    queue_type = "quorum",
    delivery_limit = 5,
    timeout = "30s",
    declare = "passive",
    jitter = "20%",
    max_age = "1h",
    immediate = 2,
    breaker = "50% of 20, pause 30s",
    dedupe = "24h",
    dedupe_key = "header:x-idempotency-key",
    retry = "tiers",
    dead_letter_index = "off",
    crate = "::rabbit_backoff"
)]
pub async fn process_order(order: Order, ctx: &Context, _db: State<Db>) -> Result<(), OrderError> {
    let _ = (order.id, ctx.attempt());
    Ok(())
}

fn main() {
    let spec = process_order.spec();
    assert_eq!(spec.queue, "work_queue");
    assert_eq!(spec.delays.as_millis(), &[500, 5_000, 60_000, 3_600_000]);
    assert_eq!((spec.prefetch, spec.concurrency), (50, Some(8)));
    assert_eq!(spec.exchange_kind, ExchangeKind::Topic);
    assert_eq!(spec.queue_type, Some(QueueType::Quorum));
    assert_eq!(spec.delivery_limit, 5);
    assert_eq!(spec.handler_timeout, Some(std::time::Duration::from_secs(30)));
    assert_eq!(spec.retry_return, RetryReturn::Exchange);
    assert_eq!(spec.declare, DeclareMode::Passive);
    assert_eq!(spec.jitter.map(|j| j.percent()), Some(20));
    assert_eq!(spec.max_age, Some(std::time::Duration::from_secs(3_600)));
    assert_eq!(spec.immediate, 2);
    assert_eq!(spec.retry, RetryBackend::Tiers);
    assert_eq!(spec.dead_letter_index, DeadLetterIndex::Off);
    assert_eq!(spec.breaker.map(|b| b.to_string()).as_deref(), Some("50% of 20, pause 30s"));
    let dedupe = spec.dedupe.as_ref().expect("dedupe is set");
    assert_eq!(dedupe.window, std::time::Duration::from_secs(86_400));
    assert_eq!(dedupe.key, DedupeKey::Header("x-idempotency-key".into()));
    let names = spec.names();
    assert_eq!(names.exchange, "work_exchange");
    assert_eq!(names.routing_key, "work");
    assert_eq!(names.retry_exchange, "retry_exchange");
    assert_eq!(names.retry_queue(5_000), "retry_5000ms");
    assert_eq!(names.dead_letter_exchange, "dlx_exchange");
    assert_eq!(names.dead_letter_queue, "dead_letter_queue");
    assert_eq!(names.dead_letter_routing_key, "dead");
    assert_eq!(process_order.required_state().len(), 1);
    assert_eq!(OrderError::Invalid("x".into()).classify(), ErrorClass::Permanent);
    assert_eq!(OrderError::Unavailable.classify(), ErrorClass::Transient);
}
