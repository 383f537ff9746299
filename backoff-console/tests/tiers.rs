//! The retry tiers view in a real headless Chromium: what waits in each
//! tier, and when each message is due.

mod common;

use std::time::Duration;

use common::*;

/// The retry tiers: what waits in each, and when each message is due;
/// listing a tier leaves its messages.
#[tokio::test]
async fn the_tiers_list_what_waits_and_when_it_is_due() {
    let Session {
        f,
        queue,
        console: _console,
        browser,
    } = alice_session("console.tiers", &tenant_letters()).await;
    let b = &browser;
    open_three_groups(b, &queue).await;
    // The retry tiers: what waits in each, and when each message is due.
    let now = std::time::SystemTime::now();
    let entered = humantime::format_rfc3339_millis(now - Duration::from_secs(15)).to_string();
    let due_at = humantime::format_rfc3339_millis(now + Duration::from_secs(45)).to_string();
    f.wait_in_tier(60_000, "waiting-1", Some(&entered)).await;
    f.wait_in_tier(60_000, "waiting-2", None).await;
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open-tiers"
    ))
    .await;
    let tier = format!("{queue}.retry_60000ms");
    let due = b
        .until(
            "the tier's two messages",
            &format!(
                "const rows = [...document.querySelectorAll('.tier-listing[data-queue=\"{tier}\"] tbody tr')];
                 return rows.length === 2 ? rows.map(r => ({{
                    id: r.dataset.messageId,
                    due: r.querySelector('.due time')?.getAttribute('datetime'),
                    shown: r.querySelector('.due').textContent,
                    exact: r.querySelector('.due time')?.title,
                 }})) : null;"
            ),
        )
        .await;
    assert_eq!(due[0]["id"], "waiting-1");
    assert_eq!(due[0]["due"], due_at, "entered + 60 s");
    assert!(
        due[0]["exact"].as_str().unwrap().starts_with(&due_at),
        "{due}"
    );
    assert!(
        due[0]["shown"].as_str().unwrap().ends_with(" ago")
            || due[0]["shown"].as_str().unwrap().starts_with("in "),
        "{due}"
    );
    assert_eq!(due[1]["id"], "waiting-2");
    assert_eq!(
        due[1]["shown"], "within 60 s (a first retry is not stamped)",
        "a first retry copy without a max_age carries only its count"
    );
    assert_eq!(
        f.tier_depth(60_000).await,
        2,
        "listing a tier leaves its messages"
    );
    fits(b, "the tiers").await;

    browser.close().await;
}
