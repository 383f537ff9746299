//! The dead letters view in a real headless Chromium: a page that fits
//! its window, a search in the bodies with its chart, messages selected
//! and replayed, every match discarded.

mod common;

use std::time::Duration;

use serde_json::json;

use common::*;

/// A 4 KB unbroken error: its group row, expanded, and its message stay
/// inside a 1400 px window.
#[tokio::test]
async fn the_page_fits_the_window_with_a_4kb_error() {
    let Session {
        f: _queues,
        queue,
        console: _console,
        browser,
    } = alice_session("console.wide", &tenant_letters()).await;
    let b = &browser;

    // The 4 KB error: its group row, expanded, and its message stay inside
    // the window.
    let groups = open_three_groups(b, &queue).await;
    let wide = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["reason"] == "exhausted")
        .expect("the wide error's group");
    fits(b, "the groups").await;
    let wide_row = format!(
        "#groups tr[data-group=\"{}\"]",
        wide["id"].as_str().unwrap()
    );
    b.click(&format!("{wide_row} .fingerprint")).await;
    assert_eq!(
        b.eval(&format!(
            "return document.querySelector('{wide_row} .fingerprint').classList.contains('open')"
        ))
        .await,
        true
    );
    fits(b, "the whole error shown").await;
    b.click(&format!("{wide_row} button.messages")).await;
    b.show_message("wide").await;
    assert_eq!(b.text("#message-error").await, wide_error());
    fits(b, "the message").await;

    if let Ok(path) = std::env::var("CONSOLE_SCREENSHOT") {
        b.click("#search-clear").await;
        b.until("every dead letter", "return document.getElementById('messages-title').textContent.startsWith('9 message(s)')").await;
        b.show_message("wide").await;
        b.client.set_window_size(1400, 1500).await.unwrap();
        b.eval("window.scrollTo(0, 0)").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Only this test's consumer: the broker may hold other tests' queues.
        b.eval(&format!(
            "for (const r of document.querySelectorAll('#consumers tbody tr')) if (r.dataset.queue !== {queue:?}) r.remove();"
        ))
        .await;
        std::fs::write(&path, b.client.screenshot().await.unwrap()).unwrap();
    }
    browser.close().await;
}

/// A search finds the text anywhere in the body, whatever its case, and
/// the chart draws the matches per group over time.
#[tokio::test]
async fn a_search_finds_text_anywhere_in_the_body_and_charts_it() {
    let Session {
        f: _queues,
        queue,
        console: _console,
        browser,
    } = alice_session("console.search", &tenant_letters()).await;
    let b = &browser;
    open_three_groups(b, &queue).await;
    // A search finds the text anywhere in the body, whatever its case.
    search_for(b, "TENANT-7").await;
    let listed = b
        .until(
            "the five matches",
            &format!("return document.getElementById('messages-title').textContent.startsWith('5 message(s)') ? (() => {{ {LISTED} }})() : null"),
        )
        .await;
    assert_eq!(listed, json!(["t7-1", "t7-2", "t7-3", "t7-4", "t7-5"]));
    // The chart: the matches per group over time, drawn as plain SVG.
    let chart = b
        .eval(
            "return { bars: document.querySelectorAll('#chart rect.bar').length,
                      legend: document.querySelectorAll('#chart-legend li').length }",
        )
        .await;
    assert_eq!(
        chart,
        json!({"bars": 5, "legend": 1}),
        "five failures of one group, minutes apart"
    );

    browser.close().await;
}

/// Two messages selected and replayed behind one confirmation stating the
/// count, the broker's new depths shown at once; then every match selected
/// and discarded behind one confirmation.
#[tokio::test]
async fn selected_messages_and_every_match_are_written_behind_one_confirmation_with_the_count() {
    let Session {
        f,
        queue,
        console: _console,
        browser,
    } = alice_session("console.select", &tenant_letters()).await;
    let b = &browser;
    open_three_groups(b, &queue).await;
    search_for(b, "TENANT-7").await;
    b.until(
        "the five matches",
        "return document.getElementById('messages-title').textContent.startsWith('5 message(s)')",
    )
    .await;
    // Two selected, replayed behind one confirmation with the count; the
    // consumer's depths are the broker's as soon as the outcome shows.
    b.click("#messages tr[data-message-id=\"t7-1\"] .pick")
        .await;
    b.click("#messages tr[data-message-id=\"t7-2\"] .pick")
        .await;
    assert_eq!(b.text("#selected-count").await, "2 selected");
    b.click("#replay-selected").await;
    let notice = b
        .confirm_replay(
            "Replay the 2 selected message(s)",
            &queue,
            "Replayed 2 message(s); 7 left",
        )
        .await;
    assert!(notice.as_str().unwrap().contains("(by alice)"), "{notice}");
    assert_eq!(f.depths().await, (2, 7), "the broker: work queue, DLQ");
    assert_eq!(
        b.eval(&depths_are(&queue, 2, 7)).await,
        true,
        "the page shows the depths the replay read after it"
    );

    // Every match selected (the page lists 3 now), discarded behind one
    // confirmation with the count.
    b.until(
        "three matches left",
        "return document.getElementById('messages-title').textContent.startsWith('3 message(s)')",
    )
    .await;
    b.click("#select-matching").await;
    b.click("#discard-selected").await;
    let question = b.confirmation().await;
    assert!(
        question.contains("Discard all 3 message(s) that match"),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    b.until("the discard's outcome", "return document.getElementById('notice').textContent.startsWith('Discarded 3 message(s); 4 left')").await;
    assert_eq!(f.depths().await, (2, 4));

    browser.close().await;
}
