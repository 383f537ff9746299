//! A handler is a plain async function behind its consumer value: it can be
//! called directly in a unit test, without any broker. The per-message
//! semantics against brokers are in `tests/semantics/`, which runs each
//! case on RabbitMQ and on the in-memory broker.

mod common;

use common::*;

#[tokio::test]
async fn a_handler_can_be_unit_tested_without_a_broker() {
    use rabbit_backoff::prelude::*;
    let journal = Journal::default();
    let ctx = Context::builder("orders")
        .retry_count(1)
        .message_id("m-9")
        .header("tenant", "acme")
        .state(journal.clone())
        .build();
    let result = process_job
        .handle(Job::new(9, Fail::Transient, Some(1)), &ctx)
        .await;
    assert!(
        result.is_ok(),
        "succeeds once the retry count reaches `attempts`"
    );
    let failed = process_job
        .handle(Job::new(10, Fail::Permanent, None), &ctx)
        .await;
    assert_eq!(
        failed.err().map(|e| e.classify()),
        Some(rabbit_backoff::ErrorClass::Permanent)
    );
    let seen = journal.calls_for(9);
    assert_eq!(
        (
            seen[0].retry_count,
            seen[0].message_id.as_deref(),
            seen[0].tenant.as_deref()
        ),
        (1, Some("m-9"), Some("acme"))
    );
}
