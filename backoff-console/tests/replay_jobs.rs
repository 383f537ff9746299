//! Replay jobs through the API: started with a canary, refused with the
//! plan's own words or when one already runs, paused, resumed, stopped and
//! taken over when nothing drives them; read from the replay log; every
//! write audited, and a job's end too.

mod common;

use std::time::Duration;

use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, ReplayOptions};
use rabbit_backoff::rules::ReplayPlan;
use rabbit_backoff_test_support::broker::url;
use rabbit_backoff_test_support::dead_letter_fixture::Fixture;
use serde_json::{Value, json};

use common::*;

/// How long a job of these tests may take to reach a state.
const WITHIN: Duration = Duration::from_secs(60);

/// The newest audit entry with this action and job, once there is one.
async fn audited(console: &Console, action: &str, job: &str) -> Value {
    api_until(
        console,
        "api/audit?limit=100",
        &format!("the audit entry {action} of job {job}"),
        WITHIN,
        |entries| {
            entries
                .as_array()?
                .iter()
                .find(|e| e["action"] == action && e["job"] == job)
                .cloned()
        },
    )
    .await
}

/// Refusals in the plan's own words, a canary, a second job turned away,
/// a pause that stops the copies, a resume, a stop that leaves the rest in
/// the dead-letter queue; each write audited with who, and the end too.
#[tokio::test]
async fn a_job_starts_with_a_canary_and_is_paused_resumed_and_stopped() {
    let letters = many_letters("db", 30, "database unavailable");
    let f = Fixture::new("console.jobs", &letters).await;
    let queue = f.queue().to_owned();
    let console = Console::start();
    let origin = console.origin();
    let bearer = format!("Bearer {TOKEN}");
    let headers = write_headers(&origin, &bearer);
    let jobs = format!("api/consumers/{queue}/replay-jobs");

    // No job yet; without the token, nothing starts and nothing is audited.
    assert_eq!(get(&console, &jobs, &[]), (200, json!([])));
    let start = r#"{"matching":{"text":"database"},"canary":3,"stop_above":"10%","rate":"5/s","fate_timeout":"1s"}"#;
    let (status, body) = post_json(&console, "replay-jobs", &queue, &headers[..2], start);
    assert_eq!(status, 401, "no token: {body}");
    assert!(body["error"].as_str().unwrap().contains("token"), "{body}");
    assert_eq!(get(&console, "api/audit", &[]), (200, json!([])));

    // A plan that makes no sense is refused in its own words.
    for (body, words) in [
        (
            r#"{"matching":{},"canary":3,"stop_above":"150%"}"#,
            "'150%' is no threshold: write a percentage between 0% and 100% (excluded), such as 10%",
        ),
        (
            r#"{"matching":{},"canary":0,"stop_above":"10%"}"#,
            "a canary of 0 messages: send at least 1",
        ),
        (
            r#"{"matching":{},"canary":3,"stop_above":"10%","rate":"fast/s"}"#,
            "'fast' is no rate: write a positive number of messages a second",
        ),
    ] {
        let (status, refused) = post_json(&console, "replay-jobs", &queue, &headers, body);
        assert_eq!(status, 400, "{body}: {refused}");
        assert!(
            refused["error"].as_str().unwrap().starts_with(words),
            "{body}: {refused}"
        );
    }
    let (status, refused) = post_json(
        &console,
        "replay-jobs",
        &queue,
        &headers,
        r#"{"canary":3,"stop_above":"10%"}"#,
    );
    assert_eq!(status, 400, "no selection: {refused}");
    assert_eq!(f.depths().await, (0, 30), "a refused job sent nothing");
    let (_, audit) = get(&console, "api/audit", &[]);
    assert_eq!(audit.as_array().unwrap().len(), 3, "{audit}");
    assert_eq!(audit[0]["action"], "replay-job");
    assert!(
        audit[0]["error"].as_str().unwrap().contains("is no rate"),
        "{audit}"
    );

    // Started: its id and status at once.
    let (status, started) = post_json(&console, "replay-jobs", &queue, &headers, start);
    assert_eq!(status, 200, "{started}");
    let id = started["id"].as_str().unwrap().to_owned();
    assert_eq!(started["job"]["id"], id.as_str());
    assert_eq!(started["by"], "operator");
    assert_eq!(started["job"]["by"], "operator");
    assert_eq!(started["job"]["plan"]["canary"], 3);
    assert_eq!(started["job"]["rate"], 5.0);
    assert!(
        ["canary", "waves"].contains(&started["job"]["state"].as_str().unwrap()),
        "{started}"
    );
    let entry = audited(&console, "replay-job", &id).await;
    assert_eq!(entry["who"], "operator");
    assert_eq!(entry["selection"]["matching"]["text"], "database");
    assert_eq!(entry["selection"]["canary"], 3);
    assert_eq!(
        entry["note"],
        "a canary of 3, stopped above 10% failures, at most 5 messages a second, fates awaited 1s"
    );

    // One job at a time on a queue.
    let (status, busy) = post_json(&console, "replay-jobs", &queue, &headers, start);
    assert_eq!(status, 409, "{busy}");
    let busy = busy["error"].as_str().unwrap();
    assert!(
        busy.starts_with(&format!("a replay job ({id}) is running on")),
        "{busy}"
    );

    // The job, read from its replay log: in the list and by its id.
    let one = format!("{jobs}/{id}");
    let (status, listed) = get(&console, &jobs, &[]);
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(
        get(&console, &format!("{jobs}/no-such-job"), &[]).0,
        404,
        "an unknown job"
    );

    // Some copies sent, then paused: no more go.
    api_until(&console, &one, "copies sent", WITHIN, |job| {
        (job["counts"]["sent"].as_u64()? >= 1).then_some(())
    })
    .await;
    let (status, paused) = control(&console, &queue, &headers, &id, "pause");
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["job"]["state"], "paused", "{paused}");
    assert_eq!(paused["job"]["controls"][0]["action"], "pause");
    assert_eq!(paused["job"]["controls"][0]["by"], "operator");
    // The pass under way sees the pause within a moment; then nothing more.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, before) = get(&console, &one, &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, after) = get(&console, &one, &[]);
    assert_eq!(after["state"], "paused", "{after}");
    assert_eq!(
        before["counts"]["sent"], after["counts"]["sent"],
        "a paused job sent more: {before} then {after}"
    );
    let sent_paused = after["counts"]["sent"].as_u64().unwrap();
    assert!(sent_paused < 30, "{after}");

    // Resumed: it sends again.
    let (status, resumed) = control(&console, &queue, &headers, &id, "resume");
    assert_eq!(status, 200, "{resumed}");
    assert_ne!(resumed["job"]["state"], "paused", "{resumed}");
    api_until(
        &console,
        &one,
        "more copies after the resume",
        WITHIN,
        |job| (job["counts"]["sent"].as_u64()? > sent_paused).then_some(()),
    )
    .await;

    // Stopped: the rest stays in the dead-letter queue.
    let (status, stopped) = control(&console, &queue, &headers, &id, "stop");
    assert_eq!(status, 200, "{stopped}");
    let ended = api_until(&console, &one, "the job stopped", WITHIN, |job| {
        (job["state"] == "stopped").then(|| job.clone())
    })
    .await;
    assert_eq!(
        ended["outcome"],
        json!({"outcome": "stopped", "by": "operator"})
    );
    let sent = ended["counts"]["sent"].as_u64().unwrap();
    assert!(sent > sent_paused && sent < 30, "{ended}");
    assert_eq!(ended["counts"]["waiting"], sent, "no consumer: no fate");
    assert_eq!(ended["canary"]["verdict"], "unwatched", "{ended}");
    assert_eq!(f.depths().await, (sent as u32, 30 - sent as u32));
    // Audited: each control with who, and the end with what it sent.
    for action in ["replay-job-pause", "replay-job-resume", "replay-job-stop"] {
        let entry = audited(&console, action, &id).await;
        assert_eq!(entry["who"], "operator", "{entry}");
        assert_eq!(entry["queue"], queue.as_str());
        assert!(entry["error"].is_null(), "{entry}");
    }
    let end = audited(&console, "replay-job-end", &id).await;
    assert_eq!(end["who"], "operator");
    assert_eq!(end["count"], sent);
    assert_eq!(end["selection"]["canary"], 3, "{end}");
    assert!(
        end["note"].as_str().unwrap().starts_with(&format!(
            "stopped by operator; {sent} sent: 0 handled, 0 failing, {sent} waiting"
        )),
        "{end}"
    );

    // An ended job has nothing to pause; the refusal is audited too.
    let (status, again) = control(&console, &queue, &headers, &id, "pause");
    assert_eq!(status, 409, "an ended job: {again}");
    assert!(
        again["error"]
            .as_str()
            .unwrap()
            .contains("has ended (stopped)"),
        "{again}"
    );

    let entry = audited(&console, "replay-job-pause", &id).await;
    assert!(
        entry["error"].as_str().unwrap().contains("has ended"),
        "{entry}"
    );
}

/// A job whose driver is gone shows as interrupted, and a resume from the
/// console takes it over and drives it to its end, sending each message
/// once.
#[tokio::test]
async fn an_interrupted_job_is_taken_over_and_completed() {
    let letters = many_letters("gone", 8, "order not found");
    let f = Fixture::new("console.jobs-take-over", &letters).await;
    let queue = f.queue().to_owned();

    // Started elsewhere, its driver gone before it sent anything.
    let dlq = Dlq::connect(&url(), &f.spec).await.unwrap();
    let plan = ReplayPlan::new(2, 0.1)
        .unwrap()
        .fate_timeout(Duration::from_secs(1));
    let job = dlq
        .start_replay(
            &DeadLetterFilter::default(),
            &ReplayOptions::default().by("cli-user"),
            &plan,
        )
        .await
        .unwrap();
    let id = job.id().to_owned();
    drop(job);
    dlq.close().await;

    let console = Console::start();
    let origin = console.origin();
    let bearer = format!("Bearer {TOKEN}");
    let headers = write_headers(&origin, &bearer);
    let one = format!("api/consumers/{queue}/replay-jobs/{id}");
    let (status, interrupted) = get(&console, &one, &[]);
    assert_eq!(status, 200, "{interrupted}");
    assert_eq!(interrupted["state"], "interrupted", "{interrupted}");
    assert_eq!(interrupted["by"], "cli-user");

    let (status, resumed) = control(&console, &queue, &headers, &id, "resume");
    assert_eq!(status, 200, "{resumed}");
    assert_ne!(resumed["job"]["state"], "interrupted", "{resumed}");
    let ended = api_until(&console, &one, "the job completed", WITHIN, |job| {
        (job["state"] == "completed").then(|| job.clone())
    })
    .await;
    assert_eq!(ended["counts"]["sent"], 8, "{ended}");
    assert_eq!(f.depths().await, (8, 0), "each message sent once");
    let entry = audited(&console, "replay-job-resume", &id).await;
    assert_eq!(entry["who"], "operator");
    assert!(
        entry["note"].as_str().unwrap().starts_with("taken over"),
        "{entry}"
    );
    let end = audited(&console, "replay-job-end", &id).await;
    assert_eq!(end["count"], 8);
    assert!(
        end["note"]
            .as_str()
            .unwrap()
            .starts_with("completed; 8 sent"),
        "{end}"
    );
}

/// `POST replay-jobs/{id}/{action}` with `{}`: a control of job `id`.
fn control(
    console: &Console,
    queue: &str,
    headers: &[(&str, &str)],
    id: &str,
    action: &str,
) -> (u16, Value) {
    post_json(
        console,
        &format!("replay-jobs/{id}/{action}"),
        queue,
        headers,
        "{}",
    )
}
