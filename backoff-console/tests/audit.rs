//! The audit view in a real headless Chromium: every write, newest first,
//! with the name of the token that asked for it; and its file.

mod common;

use serde_json::{Value, json};

use common::*;

/// The audit, newest first, with alice's name; and its file.
#[tokio::test]
async fn the_audit_lists_writes_newest_first_with_the_tokens_name() {
    let Session {
        f,
        queue,
        console,
        browser,
    } = alice_session("console.audit", &tenant_letters()).await;
    let b = &browser;

    // Alice's writes: two messages replayed, the three other matches of a
    // search discarded, one message edited and replayed.
    let origin = console.origin();
    let bearer = format!("Bearer {ALICE}");
    let alice = [
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
        ("Authorization", bearer.as_str()),
    ];
    for (action, body) in [
        ("replay", r#"{"message_ids":["t7-1","t7-2"]}"#),
        ("discard", r#"{"matching":{"text":"TENANT-7"}}"#),
        (
            "edit",
            r#"{"message_id":"fix-me","body":"{\"sku\":\"GOOD\"}","set_headers":{"tenant":"globex"},"remove_headers":["debug"]}"#,
        ),
    ] {
        let (status, outcome) = post_json(&console, action, &queue, &alice, body);
        assert_eq!(status, 200, "{action}: {outcome}");
    }
    assert_eq!(f.depths().await, (3, 3), "the broker: work queue, DLQ");
    b.client.refresh().await.unwrap();
    // The audit, newest first, with alice's name; and its file.
    let audit = b
        .until(
            "three audit entries",
            "const rows = [...document.querySelectorAll('#audit tbody tr')].map(r => ({
                who: r.querySelector('.who').textContent,
                action: r.querySelector('.action').textContent,
                count: r.querySelector('.count').textContent,
             }));
             return rows.length === 3 ? rows : null;",
        )
        .await;
    assert_eq!(
        audit,
        json!([
            {"who": "alice", "action": "edit", "count": "1"},
            {"who": "alice", "action": "discard", "count": "3"},
            {"who": "alice", "action": "replay", "count": "2"},
        ])
    );
    let file = std::fs::read_to_string(&console.audit).unwrap();
    assert_eq!(file.lines().count(), 3, "{file}");
    let last: Value = serde_json::from_str(file.lines().last().unwrap()).unwrap();
    assert_eq!(last["who"], "alice");
    assert_eq!(last["message_ids"], json!(["fix-me"]));

    browser.close().await;
}
