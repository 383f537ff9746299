//! The groups view in a real headless Chromium: the groups of a dead-letter
//! queue, hostile messages shown as text, a group replayed, a read-only
//! page, a broker error, and where the groups were read from (the index or
//! a pass), with a purge from the page.

mod common;

use std::time::Duration;

use fantoccini::Locator;
use rabbit_backoff_test_support::browser::Browser;
use rabbit_backoff_test_support::dead_letter_fixture::{DeadLetter, Fixture};
use serde_json::{Value, json};

use common::*;

/// The groups of a DLQ, found through the management API with the
/// consumer's depths, and a hostile message in them shown as text.
#[tokio::test]
async fn the_page_groups_dead_letters_and_shows_hostile_ones_as_text() {
    let f = Fixture::new("console.page", &letters()).await;
    let queue = f.queue().to_owned();
    let console = Console::start();
    let browser = Browser::start().await;
    let b = &browser;
    open_with_a_wrong_token(b, &console, &queue).await;
    let tiers = b
        .text(&format!("#consumers tr[data-queue=\"{queue}\"] .tiers"))
        .await;
    assert!(
        tiers.contains(&format!("{queue}.retry_1000ms: 0"))
            && tiers.contains(&format!("{queue}.retry_2000ms: 0")),
        "{tiers}"
    );

    // Its dead letters in three groups.
    let groups = open_three_groups(b, &queue).await;
    let database = group(&groups, "database unavailable");
    assert_eq!(database["count"], "3");
    assert_eq!(database["reason"], "exhausted");
    assert_eq!(database["writes"], 2, "replay and discard");
    let orders = group(&groups, "order <n> not found");
    assert_eq!(orders["count"], "2");
    assert_eq!(orders["reason"], "permanent");
    let hostile = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["reason"] == "decode")
        .expect("the hostile message's group");

    // The hostile message: its body and error are shown as text, and
    // nothing in them ran.
    b.click(&format!(
        "#groups tr[data-group=\"{}\"] button.messages",
        hostile["id"].as_str().unwrap()
    ))
    .await;
    b.show_message("hostile").await;
    assert_eq!(b.text("#message-body").await, HOSTILE_BODY);
    assert_eq!(b.text("#message-error").await, HOSTILE_ERROR);
    let ran = b
        .eval(
            "return {
                title: document.title,
                pwned: typeof window.pwned,
                elements: document.querySelectorAll('main img, main script').length,
            }",
        )
        .await;
    assert_eq!(
        ran,
        json!({"title": "rabbit-backoff console", "pwned": "undefined", "elements": 0})
    );

    browser.close().await;
}

/// A dismissed confirmation that changes nothing, a replay refused with a
/// wrong token from the URL fragment, and the group replayed with the token
/// typed in.
#[tokio::test]
async fn a_group_is_replayed_only_when_confirmed_with_the_right_token() {
    let f = Fixture::new("console.replay-group", &letters()).await;
    let queue = f.queue().to_owned();
    let console = Console::start();
    let browser = Browser::start().await;
    let b = &browser;
    open_with_a_wrong_token(b, &console, &queue).await;
    // Its dead letters in three groups.
    let groups = open_three_groups(b, &queue).await;
    let database = group(&groups, "database unavailable");
    // A dismissed confirmation changes nothing.
    let database_id = database["id"].as_str().unwrap().to_owned();
    b.click(&format!(
        "#groups tr[data-group=\"{database_id}\"] button.discard"
    ))
    .await;
    let question = b.confirmation().await;
    assert!(question.contains("Discard the 3 message(s)"), "{question}");
    b.client.dismiss_alert().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        f.depths().await,
        (0, 6),
        "a dismissed discard removed messages"
    );

    // With the fragment's wrong token, the confirmed replay is refused and
    // the page says so.
    b.click(&format!(
        "#groups tr[data-group=\"{database_id}\"] button.replay"
    ))
    .await;
    b.confirmation().await;
    b.client.accept_alert().await.unwrap();
    let error = b
        .until(
            "the refusal",
            "const e = document.getElementById('error'); return e.hidden ? null : e.textContent;",
        )
        .await;
    assert_eq!(error, "Replay refused or failed: wrong token");
    assert_eq!(f.depths().await, (0, 6), "a refused replay moved messages");

    // The right token typed in.
    b.client
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    b.click("#token-save").await;

    // The group replayed after the confirmation.
    b.click(&format!(
        "#groups tr[data-group=\"{database_id}\"] button.replay"
    ))
    .await;
    b.confirm_replay(
        "Replay the 3 message(s)",
        &queue,
        "Replayed 3 message(s); 3 left",
    )
    .await;
    let groups = b
        .until(
            "the replayed group gone",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 2 ? g : null;"),
        )
        .await;
    assert!(
        groups
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["id"] != database_id.as_str()),
        "{groups}"
    );
    assert_eq!(f.depths().await, (3, 3), "the broker: work queue, DLQ");
    assert!(
        b.client
            .find(Locator::Css("#error"))
            .await
            .unwrap()
            .attr("hidden")
            .await
            .unwrap()
            .is_some(),
        "the refusal's message is gone"
    );
    b.until(
        "the work queue holding the 3 replayed messages and the DLQ 3",
        &depths_are(&queue, 3, 3),
    )
    .await;

    browser.close().await;
}

/// A read-only console offers no write and asks for no token.
#[tokio::test]
async fn a_read_only_page_offers_no_write() {
    // The dead letters of two groups: all but the database's.
    let two_groups: Vec<DeadLetter> = letters()
        .into_iter()
        .filter(|letter| !letter.id.starts_with("db-"))
        .collect();
    let f = Fixture::new("console.read-only-page", &two_groups).await;
    let queue = f.queue().to_owned();
    let browser = Browser::start().await;
    let b = &browser;
    // A read-only console offers no write.
    let read_only = Console::start_with(|console| console.read_only(true));
    b.client.goto(&read_only.url).await.unwrap();
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    let groups = b
        .until(
            "the groups in read-only mode",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 2 ? g : null;"),
        )
        .await;
    assert!(
        groups.as_array().unwrap().iter().all(|g| g["writes"] == 0),
        "{groups}"
    );
    assert_eq!(b.text("#mode").await, "read-only");
    assert!(
        !b.client
            .find(Locator::Css("#token-form"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap(),
        "a read-only console asks for no token"
    );

    browser.close().await;
}

/// A broker error comes back as JSON and shows in the page.
#[tokio::test]
async fn a_broker_error_shows_in_the_page() {
    let browser = Browser::start().await;
    let b = &browser;
    let unreachable = Console::start_with(|console| console.management_url("http://127.0.0.1:1"));
    b.client.goto(&unreachable.url).await.unwrap();
    let error = b
        .until(
            "the management API's error",
            "const e = document.getElementById('error'); return e.hidden ? null : e.textContent;",
        )
        .await;
    assert!(
        error
            .as_str()
            .unwrap()
            .starts_with("Consumers: the broker: http://127.0.0.1:1"),
        "{error}"
    );
    browser.close().await;
}

/// The line under the groups says where they were read from and why: from
/// the index; from a pass when the index is out of step (a dead letter
/// published straight to the queue), which heals it, so the next read is
/// from the index again; and a purge from the page, confirmed, leaves the
/// groups read from the index, and is audited.
#[tokio::test]
async fn the_groups_say_whether_they_come_from_the_index_or_a_pass_and_a_purge_is_audited() {
    let f = Fixture::new("console.source", &letters()).await;
    let queue = f.queue().to_owned();
    let console = Console::start();
    let browser = Browser::start().await;
    let b = &browser;
    b.client
        .goto(&format!("{}#token={TOKEN}", console.url))
        .await
        .expect("open the console");
    b.until("the consumer", &depths_are(&queue, 0, 6)).await;
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    b.until(
        "the groups read from the index",
        "return document.getElementById('groups-source').textContent === 'From the index';",
    )
    .await;
    assert_eq!(
        b.eval("return document.getElementById('groups-source').dataset.source")
            .await,
        "index"
    );

    // A dead letter that reached the queue past the index: the next read
    // is a pass, which says why and leaves a checkpoint.
    b.eval(WATCH_SOURCE).await;
    f.bypass_the_index("stray", "<b>stray</b> not found").await;
    let sources = b
        .until(
            "the groups read with a pass",
            "return window.sources.some(s => s.startsWith('From a pass')) ? window.sources : null;",
        )
        .await;
    let pass = sources
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|s| s.starts_with("From a pass"))
        .unwrap();
    assert!(
        pass.starts_with(
            "From a pass over the queue: index out of step: 6 live entries, 7 messages; \
             checkpoint written at offset "
        ),
        "{pass}"
    );
    b.until(
        "the stray dead letter's group",
        &format!(
            "const g = (() => {{ {GROUPS} }})(); return g.some(r => r.fingerprint === '<b>stray</b> not found');"
        ),
    )
    .await;
    // The next read is from the index, from that checkpoint.
    b.eval(WATCH_SOURCE).await;
    b.click("#search-go").await;
    b.until(
        "the groups read from the index again",
        "return window.sources.length > 1 && window.sources[window.sources.length - 1] === 'From the index';",
    )
    .await;
    let groups = b.eval(GROUPS).await;
    assert_eq!(group(&groups, "database unavailable")["count"], "3");
    assert_eq!(group(&groups, "<b>stray</b> not found")["count"], "1");
    assert_eq!(
        b.eval("return document.querySelectorAll('#groups b, #groups-source *').length")
            .await,
        0,
        "nothing parsed as HTML"
    );

    // A purge from the page, confirmed: the queue is empty, the groups are
    // read from the index, and the audit has it.
    b.click("#purge").await;
    let question = b.confirmation().await;
    assert!(
        question.starts_with(&format!(
            "Purge the dead-letter queue of {queue}: all 7 message(s)"
        )),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    let notice = b
        .until(
            "the purge's notice",
            "const n = document.getElementById('notice'); return n.textContent.startsWith('Purged') ? n.textContent : null;",
        )
        .await;
    assert!(
        notice
            .as_str()
            .unwrap()
            .starts_with(&format!("Purged 7 message(s) from the dead-letter queue of {queue} (by operator). The index: checkpoint written at offset")),
        "{notice}"
    );
    assert_eq!(f.depths().await, (0, 0));
    b.until(
        "no groups, read from the index",
        "return document.querySelectorAll('#groups tbody tr').length === 0
            && document.getElementById('groups-source').textContent === 'From the index';",
    )
    .await;
    let audit = b
        .until(
            "the purge in the audit",
            "const r = [...document.querySelectorAll('#audit tbody tr')].find(r => r.querySelector('.action').textContent === 'purge');
             return r ? { who: r.querySelector('.who').textContent, count: r.querySelector('.count').textContent,
                          outcome: r.querySelector('.outcome').textContent } : null;",
        )
        .await;
    assert_eq!(audit["who"], "operator");
    assert_eq!(audit["count"], "7");
    assert!(
        audit["outcome"]
            .as_str()
            .unwrap()
            .starts_with("done: checkpoint written at offset"),
        "{audit}"
    );
    browser.close().await;
}

/// Opens the console's page with a wrong token in the URL fragment, which
/// the page takes and drops from the address bar, and waits for the
/// consumer of `queue`, found through the management API, with its six
/// dead letters.
async fn open_with_a_wrong_token(b: &Browser, console: &Console, queue: &str) {
    // A token in the fragment is taken, and leaves the address bar; this
    // one is wrong.
    b.client
        .goto(&format!("{}#token=not-the-console-token-0000", console.url))
        .await
        .expect("open the console");
    b.until(
        "the fragment's token taken",
        "return location.hash === '' && document.getElementById('token-state').textContent === 'token set';",
    )
    .await;

    // The consumer, found through the management API, with its depths.
    b.until("the consumer with 6 dead letters", &depths_are(queue, 0, 6))
        .await;
}
