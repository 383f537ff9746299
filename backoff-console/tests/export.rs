//! The export in a real headless Chromium: what matches, as `dlq export
//! --jsonl` writes it.

mod common;

use serde_json::Value;

use common::*;

/// What matches, exported as `dlq export --jsonl` writes it.
#[tokio::test]
async fn the_matches_export_as_dlq_export_writes_them() {
    let Session {
        f: _queues,
        queue,
        console: _console,
        browser,
    } = alice_session("console.export", &tenant_letters()).await;
    let b = &browser;
    open_three_groups(b, &queue).await;
    // What matches, exported as `dlq export --jsonl` writes it.
    search_for(b, "tenant-9").await;
    b.until(
        "two matches",
        "return document.getElementById('messages-title').textContent.startsWith('2 message(s)')",
    )
    .await;
    let exported = b
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(document.getElementById('export').href).then(r => r.text()).then(done, e => done(String(e)));",
            vec![],
        )
        .await
        .unwrap();
    let records: Vec<Value> = exported
        .as_str()
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(records.len(), 2, "{exported}");
    assert_eq!(records[0]["properties"]["message_id"], "t9-1");
    let record: rabbit_backoff::dead_letters::DeadLetterRecord =
        serde_json::from_value(records[1].clone()).expect("a record `dlq import` reads");
    assert_eq!(
        record.message().unwrap().1,
        b"{\"order\":12,\"tenant\":\"tenant-9\"}"
    );

    browser.close().await;
}
