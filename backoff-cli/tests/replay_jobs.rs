//! `rabbit-backoff dlq replay --canary` as a job: plans that make no sense
//! refused before anything moves, a job whose queue has no rabbit-backoff
//! consumer going on unwatched, and a driver killed mid-job found
//! interrupted, then resumed from its log without a message sent twice.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lapin::options::BasicGetOptions;
use rabbit_backoff_test_support::broker::url;

use common::*;

/// The replay log and the lock of the fixture's dead-letter queue, deleted
/// when dropped.
fn job_queues(f: &Fixture) -> rabbit_backoff_test_support::cleanup::Cleanup {
    let log = format!("{}.dlq.replays", f.queue);
    rabbit_backoff_test_support::cleanup::Cleanup::default()
        .queue(&format!("{log}.lock"))
        .queue(&log)
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every message in `queue`, taken, by `message_id`: how many of each.
async fn drain(queue: &str) -> HashMap<String, u32> {
    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    let mut seen = HashMap::new();
    while let Some(got) = channel
        .basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        let id = got
            .delivery
            .properties
            .message_id()
            .as_ref()
            .map(|id| id.to_string())
            .unwrap_or_default();
        *seen.entry(id).or_default() += 1;
    }
    let _ = connection.close(200, "".into()).await;
    seen
}

async fn depth(queue: &str) -> u32 {
    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    let depth = declare::passive(&channel, queue).await.message_count();
    let _ = connection.close(200, "".into()).await;
    depth
}

#[tokio::test]
async fn plans_that_make_no_sense_are_refused_and_nothing_moves() {
    let f = Fixture::new("rj-refused", 3).await;
    let _jobs = job_queues(&f);
    for (args, says) in [
        (&["--canary", "0"][..], "send at least 1"),
        (
            &["--canary", "5", "--stop-above", "150%"],
            "between 0% and 100%",
        ),
        (&["--canary", "5", "--stop-above", "ten"], "such as 10%"),
        (&["--canary", "5", "--window", "0"], "a window of 0 fates"),
        (
            &["--canary", "5", "--fate-timeout", "soon"],
            "write e.g. 120s",
        ),
        (&["--canary", "5", "--rate", "0/s"], "rate"),
        (&["--stop-above", "10%"], "--canary"),
    ] {
        let refused = dlq_classic("replay", &f.queue, args);
        assert!(!refused.status.success(), "{args:?} was accepted");
        assert!(
            stderr(&refused).contains(says),
            "{args:?}: {}",
            stderr(&refused)
        );
    }
    assert_eq!(depth(&format!("{}.dlq", f.queue)).await, 3);
    assert_eq!(depth(&f.queue).await, 0);
}

#[tokio::test]
async fn a_driver_killed_mid_job_is_interrupted_and_resumes_without_a_copy_twice() {
    const N: usize = 40;
    let f = Fixture::new("rj-killed", N).await;
    let _jobs = job_queues(&f);
    let dlq = format!("{}.dlq", f.queue);
    // No rabbit-backoff consumer reads the work queue: the canary's fates
    // never come, and the job goes on unwatched after a second.
    let mut driver = Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
        .args([
            "dlq",
            "replay",
            "--queue",
            &f.queue,
            "--queue-type",
            "classic",
            "--canary",
            "5",
            "--fate-timeout",
            "1s",
            "--rate",
            "10/s",
            "--by",
            "ops",
        ])
        .env("AMQP_URL", url())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(driver.stdout.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    // The rest of what it prints is read (and dropped) until it dies.
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    let id = first
        .split("replay job ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no job id in {first:?}"))
        .to_owned();
    let status = |id: &str| {
        json(&dlq_classic(
            "replay",
            &f.queue,
            &["--status", id, "--json"],
        ))
    };
    // Killed (SIGKILL) in its waves.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let job = &status(&id)[0];
        if job["state"] == "waves" && job["counts"]["sent"].as_u64().unwrap() >= 15 {
            assert_eq!(job["canary"]["verdict"], "unwatched", "{job}");
            break;
        }
        assert!(Instant::now() < deadline, "the waves never began: {job}");
        std::thread::sleep(Duration::from_millis(50));
    }
    driver.kill().unwrap();
    driver.wait().unwrap();
    // Nothing drives it: it is interrupted (once the broker has seen the
    // driver's connection go, and its lock with it).
    let deadline = Instant::now() + Duration::from_secs(30);
    let sent = loop {
        let job = &status(&id)[0];
        if job["state"] == "interrupted" {
            break job["counts"]["sent"].as_u64().unwrap();
        }
        assert!(Instant::now() < deadline, "never interrupted: {job}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!((15..N as u64).contains(&sent), "{sent}");
    let listed = dlq_classic("replay", &f.queue, &["--status", "all"]);
    assert!(
        stdout(&listed).contains(&id) && stdout(&listed).contains("interrupted"),
        "{}",
        stdout(&listed)
    );

    // Resumed from its log: the rest is sent, nothing twice.
    let resumed = dlq_classic("replay", &f.queue, &["--resume", &id, "--by", "oncall"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let out = stdout(&resumed);
    assert!(out.contains("resumed from its log"), "{out}");
    assert!(out.contains(&format!("replay job {id} completed")), "{out}");
    let copies = drain(&f.queue).await;
    assert!(copies.values().all(|n| *n == 1), "sent twice: {copies:?}");
    // A kill can fall between a copy's record and its confirm's: that
    // original stays in the dead-letter queue (its copy may have left, or
    // not), as docs/dead-letters.md says; at 10 a second, one or two.
    let left = drain(&dlq).await;
    assert!(left.len() <= 2, "{left:?}");
    assert!(
        (0..N).all(|i| {
            let id = format!("m-{i}");
            copies.contains_key(&id) || left.contains_key(&id)
        }),
        "lost: copies {copies:?}, left {left:?}"
    );
    let job = &status(&id)[0];
    assert_eq!(job["state"], "completed");
    assert_eq!(job["counts"]["sent"].as_u64(), Some(N as u64));
    // An ended job is not resumed again, and says so.
    let again = dlq_classic("replay", &f.queue, &["--resume", &id]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("has ended"), "{}", stderr(&again));
}
