//! A replay job from the page, in a real headless Chromium: started from
//! the dead-letters view with a canary and a slow rate, its progress shown,
//! still shown after a reload, paused (no more copies), resumed, and seen
//! to complete; its start, controls and end in the audit.

mod common;

use std::time::{Duration, Instant};

use fantoccini::Locator;
use rabbit_backoff_test_support::browser::Browser;
use serde_json::Value;

use common::*;

/// The dead letters of the job: more than the job sends in the time the
/// test takes to reload the page and pause it.
const LETTERS: usize = 60;

/// A script that returns the row of job `id` (or of the only job, when
/// `id` is empty) as the panel shows it.
fn job_row(id: &str) -> String {
    format!(
        "const rows = [...document.querySelectorAll('#jobs tbody tr')];
         const r = {id:?} ? rows.find(r => r.dataset.job === {id:?}) : (rows.length === 1 ? rows[0] : null);
         if (!r || document.getElementById('jobs-section').hidden) return null;
         const cell = c => r.querySelector(c).textContent;
         return {{ id: r.dataset.job, state: cell('.state'), sent: Number(cell('.sent')),
                  handled: Number(cell('.handled')), failing: Number(cell('.failing')),
                  waiting: Number(cell('.waiting')), canary: cell('.canary'), who: cell('.who'),
                  buttons: [...r.querySelectorAll('.actions button')].map(b => b.className.split(' ')[0]) }};"
    )
}

/// The row of job `id` once `test` (a JavaScript condition on `row`) holds.
async fn row_when(b: &Browser, what: &str, id: &str, test: &str) -> Value {
    b.until(
        what,
        &format!(
            "const row = (() => {{ {} }})(); return row && ({test}) ? row : null;",
            job_row(id)
        ),
    )
    .await
}

/// Types `value` into the input `css`, replacing what it holds.
async fn type_into(b: &Browser, css: &str, value: &str) {
    let input = b.client.find(Locator::Css(css)).await.unwrap();
    input.clear().await.unwrap();
    input.send_keys(value).await.unwrap();
}

#[tokio::test]
async fn a_job_started_from_the_page_shows_its_progress_survives_a_reload_and_is_paused_and_resumed()
 {
    let letters = many_letters("page", LETTERS, "database unavailable");
    let Session {
        f,
        queue,
        console,
        browser,
    } = alice_session("console.jobs-page", &letters).await;
    let b = &browser;

    // The dead letters of the consumer, in one group, and its jobs: none.
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    let group = b
        .until(
            "the group",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 1 ? g[0] : null;"),
        )
        .await;
    assert_eq!(group["count"], LETTERS.to_string());
    b.until(
        "no replay job yet",
        "return !document.getElementById('jobs-section').hidden && !document.getElementById('jobs-empty').hidden;",
    )
    .await;

    // The group replayed as a job: a canary of 5, at 5 messages a second,
    // its fates awaited 1 s (no consumer runs: it goes on unwatched).
    b.click("#job-canary-on").await;
    type_into(b, "#job-canary", "5").await;
    type_into(b, "#job-stop-above", "10%").await;
    type_into(b, "#job-rate", "5/s").await;
    type_into(b, "#job-fate-timeout", "1s").await;
    let id = group["id"].as_str().unwrap();
    b.click(&format!("#groups tr[data-group=\"{id}\"] button.replay"))
        .await;
    let question = b.confirmation().await;
    assert!(
        question.contains(&format!("Replay the {LETTERS} message(s) of group {id}"))
            && question.contains(&queue)
            && question.ends_with(
                "as a replay job: a canary of 5, stopped above 10% failures, at most 5 messages a second, fates awaited 1s?"
            ),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    let notice = b
        .until(
            "the job's start",
            "const n = document.getElementById('notice'); return n.hidden ? null : n.textContent;",
        )
        .await;
    assert!(
        notice.as_str().unwrap().starts_with("Replay job ")
            && notice.as_str().unwrap().contains(" started on "),
        "{notice}"
    );

    // Its progress: the canary sent, judged unwatched, then the waves.
    let started = row_when(b, "the job sending", "", "row.sent >= 1").await;
    let job = started["id"].as_str().unwrap().to_owned();
    assert!(
        notice.as_str().unwrap().contains(&job),
        "{notice} names {job}"
    );
    assert!(
        started["who"].as_str().unwrap().starts_with("alice"),
        "{started}"
    );
    let waves = row_when(
        b,
        "the waves under way",
        &job,
        "row.state === 'waves' && row.sent > 5",
    )
    .await;
    assert_eq!(waves["canary"], "unwatched: no fate came", "{waves}");
    assert_eq!(waves["handled"], 0);
    assert_eq!(waves["failing"], 0);
    assert_eq!(waves["waiting"], waves["sent"], "{waves}");
    assert_eq!(
        waves["buttons"],
        serde_json::json!(["pause", "stop"]),
        "{waves}"
    );
    let before_reload = waves["sent"].as_u64().unwrap();

    // A reload: the panel is shown again, read from the replay log, and the
    // job still runs there.
    b.client.refresh().await.unwrap();
    let reloaded = row_when(
        b,
        "the job after the reload",
        &job,
        &format!("row.sent > {before_reload} && row.state === 'waves'"),
    )
    .await;
    assert!(
        reloaded["sent"].as_u64().unwrap() < LETTERS as u64,
        "{reloaded}"
    );

    // The token typed in again (a reload forgets it), then paused: no
    // more copies go.
    type_into(b, "#token", ALICE).await;
    b.click("#token-save").await;
    b.click(&format!("#jobs tr[data-job=\"{job}\"] button.pause"))
        .await;
    row_when(b, "the job paused", &job, "row.state === 'paused'").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let paused = row_when(b, "the paused job", &job, "true").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = row_when(b, "the paused job", &job, "true").await;
    assert_eq!(still["state"], "paused", "{still}");
    assert_eq!(
        paused["sent"], still["sent"],
        "a paused job sent more: {paused} then {still}"
    );
    assert_eq!(still["buttons"], serde_json::json!(["resume", "stop"]));
    assert!(
        still["who"].as_str().unwrap().ends_with("pause by alice"),
        "{still}"
    );
    let sent_paused = still["sent"].as_u64().unwrap();
    assert!(sent_paused < LETTERS as u64, "{still}");
    let (work, _) = f.depths().await;
    assert_eq!(
        u64::from(work),
        sent_paused,
        "the work queue holds the copies sent"
    );

    // Resumed: it sends again, and completes.
    b.click(&format!("#jobs tr[data-job=\"{job}\"] button.resume"))
        .await;
    row_when(
        b,
        "the job sending again",
        &job,
        &format!("row.state === 'waves' && row.sent > {sent_paused}"),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = loop {
        let row = b
            .eval(&format!(
                "const row = (() => {{ {} }})(); return row && row.state === 'completed' ? row : null;",
                job_row(&job)
            ))
            .await;
        if !row.is_null() {
            break row;
        }
        assert!(Instant::now() < deadline, "the job never completed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(done["sent"], LETTERS as u64, "{done}");
    assert_eq!(
        done["buttons"],
        serde_json::json!([]),
        "an ended job has no control"
    );
    assert_eq!(
        f.depths().await,
        (LETTERS as u32, 0),
        "every message sent once"
    );

    // The audit: who started it and its plan, the pause, the resume, the end.
    let actions = b
        .until(
            "the job's end in the audit",
            "const rows = [...document.querySelectorAll('#audit tbody tr')].map(r => ({
                who: r.querySelector('.who').textContent,
                action: r.querySelector('.action').textContent,
             }));
             return rows.some(r => r.action === 'replay-job-end') ? rows : null;",
        )
        .await;
    let actions: Vec<(String, String)> = actions
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["who"].as_str().unwrap().to_owned(),
                r["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for action in [
        "replay-job-end",
        "replay-job-resume",
        "replay-job-pause",
        "replay-job",
    ] {
        assert!(
            actions.contains(&("alice".to_owned(), action.to_owned())),
            "{action} by alice in {actions:?}"
        );
    }
    let (_, audit) = get(&console, "api/audit", &[]);
    let start = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "replay-job")
        .unwrap();
    assert_eq!(start["job"], job.as_str());
    assert_eq!(start["selection"]["group"], id);
    assert_eq!(start["selection"]["rate"], "5/s");
    fits(b, "the page with a replay job").await;

    browser.close().await;
}
