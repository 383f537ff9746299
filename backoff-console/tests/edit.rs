//! The edit of one message in a real headless Chromium: replayed with the
//! change, its original in its history under the token's name.

mod common;

use lapin::types::AMQPValue;
use rabbit_backoff_test_support::dead_letter_fixture::DeadLetter;

use common::*;

/// A message edited, then replayed: the copy carries the change, its
/// history the original and who did it (three dead letters stay).
#[tokio::test]
async fn an_edited_message_replays_with_its_original_in_its_history() {
    let Session {
        f,
        queue,
        console: _console,
        browser,
    } = alice_session(
        "console.edit",
        &tenant_letters()
            .into_iter()
            .filter(|letter| ["wide", "t9-1", "t9-2", "fix-me"].contains(&letter.id))
            .collect::<Vec<DeadLetter>>(),
    )
    .await;
    let b = &browser;
    open_three_groups(b, &queue).await;
    // Edited, then replayed: the copy carries the change, its history the
    // original and who did it.
    search_for(b, "sku").await;
    b.until(
        "the message to fix",
        "return document.getElementById('messages-title').textContent.startsWith('1 message(s)')",
    )
    .await;
    b.show_message("fix-me").await;
    b.click("#message-edit").await;
    b.until(
        "the whole body to edit",
        "return document.getElementById('edit-body').value === '{\"sku\":\"BAD\"}'",
    )
    .await;
    b.eval(
        "document.getElementById('edit-body').value = '{\"sku\":\"GOOD\"}';
         document.getElementById('edit-headers').value = 'tenant: globex';",
    )
    .await;
    b.click("#edit-submit").await;
    let question = b.confirmation().await;
    assert!(
        question.contains("Replay message fix-me with the edited body and headers"),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    b.until("the edit's outcome", "return document.getElementById('notice').textContent.startsWith('Replayed edited 1 message(s); 3 left')").await;
    let replayed = f.take_from_work_queue().await;
    let edited = replayed
        .iter()
        .find(|(id, _, _)| id == "fix-me")
        .expect("the edited copy in the work queue");
    assert_eq!(edited.1, b"{\"sku\":\"GOOD\"}");
    let headers = &edited.2;
    assert_eq!(
        headers.get("tenant"),
        Some(&AMQPValue::LongString("globex".into()))
    );
    assert_eq!(headers.get("debug"), None, "a header left out is removed");
    let Some(AMQPValue::FieldArray(history)) = headers.get("x-replay-history") else {
        panic!("no history: {headers:?}")
    };
    let Some(AMQPValue::FieldTable(entry)) = history.as_slice().first() else {
        panic!("no history entry")
    };
    let entry = entry.inner();
    assert_eq!(
        entry.get("x-original-body"),
        Some(&AMQPValue::LongString("{\"sku\":\"BAD\"}".into()))
    );
    assert_eq!(
        entry.get("x-replayed-by"),
        Some(&AMQPValue::LongString("alice".into()))
    );
    assert_eq!(
        entry.get("x-error"),
        Some(&AMQPValue::LongString("unknown sku BAD".into()))
    );
    let Some(AMQPValue::FieldTable(original)) = entry.get("x-original-headers") else {
        panic!("no original headers: {entry:?}")
    };
    assert_eq!(
        original.inner().get("tenant"),
        Some(&AMQPValue::LongString("acme".into()))
    );
    assert_eq!(
        original.inner().get("debug"),
        Some(&AMQPValue::LongString("yes".into()))
    );

    browser.close().await;
}
