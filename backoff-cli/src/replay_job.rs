//! `dlq replay --canary N`: a replay job, driven from the command, that
//! prints its canary's judgement and its waves; and `--status`, `--pause`,
//! `--resume`, `--stop` for a job driven anywhere.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use rabbit_backoff::dead_letters::{
    DeadLetterFilter, Dlq, ReplayControl, ReplayJobState, ReplayJobStatus, ReplayOptions,
    ReplayOutcome,
};
use rabbit_backoff::rules::{ReplayPlan, parse_threshold};

use crate::json_output;
use crate::table;

/// The exit status of a replay job that stopped itself: its copies failed
/// again above the threshold.
pub const STOPPED_ON_FAILURES: u8 = 3;

/// A watched replay's plan, and the controls of a job.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Send this many messages first, wait for each one's fate (handled,
    /// retrying, dead-lettered again), and go on in waves only if their
    /// failures stay at or under --stop-above. The replay is then a job,
    /// recorded in the dead-letter queue's replay log.
    #[arg(long, value_name = "N")]
    canary: Option<u32>,
    /// The share of failures above which the job stops: after the canary,
    /// and on the latest --window fates during the waves [default: 10%].
    #[arg(long, value_name = "PERCENT", requires = "canary", value_parser = threshold)]
    stop_above: Option<f64>,
    /// The waves are judged on the latest N fates [default: the canary, at
    /// least 50].
    #[arg(long, value_name = "N", requires = "canary")]
    window: Option<u32>,
    /// How long the canary waits for its fates; a fate not seen by then is
    /// unknown, and if none is known the job goes on unwatched (the queue's
    /// consumer is not a rabbit-backoff one) [default: 120s].
    #[arg(long, value_name = "DURATION", requires = "canary", value_parser = duration)]
    fate_timeout: Option<Duration>,
    /// Who asks, written into the job's log and each copy's history
    /// [default: $USER].
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
    /// Show replay job ID (`all`: every job of the queue) and send nothing.
    #[arg(long, value_name = "ID", conflicts_with_all = ["canary", "pause", "resume", "stop"])]
    status: Option<String>,
    /// Pause replay job ID, wherever it runs: it sends nothing more until
    /// resumed.
    #[arg(long, value_name = "ID", conflicts_with_all = ["canary", "resume", "stop"])]
    pause: Option<String>,
    /// Resume replay job ID: a paused job goes on where it runs; an
    /// interrupted one (its command or console is gone) is driven from
    /// this command, never sending what its log says it sent.
    #[arg(long, value_name = "ID", conflicts_with_all = ["canary", "stop"])]
    resume: Option<String>,
    /// Stop replay job ID for good: what it did not send stays in the
    /// dead-letter queue.
    #[arg(long, value_name = "ID", conflicts_with = "canary")]
    stop: Option<String>,
}

fn threshold(text: &str) -> Result<f64, String> {
    parse_threshold(text).map_err(|e| e.to_string())
}

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("`{text}`: {e}; write e.g. 120s or 5m"))
}

impl JobArgs {
    /// Whether the command is about a job rather than a plain replay.
    pub fn is_job(&self) -> bool {
        self.canary.is_some()
            || self.status.is_some()
            || self.pause.is_some()
            || self.resume.is_some()
            || self.stop.is_some()
    }

    fn who(&self) -> Option<String> {
        self.by.clone().or_else(|| std::env::var("USER").ok())
    }

    fn plan(&self) -> Result<Option<ReplayPlan>, String> {
        let Some(canary) = self.canary else {
            return Ok(None);
        };
        let mut plan =
            ReplayPlan::new(canary, self.stop_above.unwrap_or(0.1)).map_err(|e| e.to_string())?;
        if let Some(window) = self.window {
            plan = plan.window(window).map_err(|e| e.to_string())?;
        }
        if let Some(timeout) = self.fate_timeout {
            plan = plan.fate_timeout(timeout);
        }
        Ok(Some(plan))
    }
}

/// Runs the job part of `dlq replay`.
pub async fn run(
    dlq: &Dlq,
    filter: &DeadLetterFilter,
    mut options: ReplayOptions,
    job: &JobArgs,
    json: bool,
) -> Result<ExitCode, String> {
    let queue = dlq.dead_letter_queue().to_owned();
    let who = job.who();
    if let Some(id) = &job.status {
        let jobs = if id == "all" {
            dlq.replay_jobs().await.map_err(|e| e.to_string())?
        } else {
            vec![dlq.replay_job(id).await.map_err(|e| e.to_string())?]
        };
        if json {
            json_output::print(&jobs)?;
        } else {
            print_jobs(&queue, &jobs);
        }
        return Ok(ExitCode::SUCCESS);
    }
    for (id, action) in [
        (&job.pause, ReplayControl::Pause),
        (&job.stop, ReplayControl::Stop),
    ] {
        if let Some(id) = id {
            let status = dlq
                .control_replay(id, action, who.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            return finish(&queue, &status, json, false);
        }
    }
    if let Some(id) = &job.resume {
        let status = dlq.replay_job(id).await.map_err(|e| e.to_string())?;
        if status.state != ReplayJobState::Interrupted {
            let status = dlq
                .control_replay(id, ReplayControl::Resume, who.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            return finish(&queue, &status, json, false);
        }
        let driven = dlq
            .resume_replay(id, who.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        if !json {
            println!("{queue}: replay job {id} resumed from its log");
        }
        return drive(&queue, driven, json).await;
    }
    let plan = job.plan()?.expect("a job without controls has a canary");
    options.by = who;
    let started = dlq
        .start_replay(filter, &options, &plan)
        .await
        .map_err(|e| e.to_string())?;
    if !json {
        println!(
            "{queue}: replay job {} started: a canary of {}, stopped above {}% failures{}",
            started.id(),
            plan.canary,
            plan.stop_above * 100.0,
            options
                .rate
                .map(|r| format!(", at most {r} messages a second"))
                .unwrap_or_default()
        );
    }
    drive(&queue, started, json).await
}

/// Drives `job` to its end, printing each step.
async fn drive(
    queue: &str,
    job: rabbit_backoff::dead_letters::ReplayJob,
    json: bool,
) -> Result<ExitCode, String> {
    let mut printer = Printer::default();
    let mut progress = |status: &ReplayJobStatus| {
        if !json {
            printer.step(status);
        }
    };
    let status = job.run(&mut progress).await.map_err(|e| e.to_string())?;
    finish(queue, &status, json, true)
}

fn finish(
    queue: &str,
    status: &ReplayJobStatus,
    json: bool,
    ended_here: bool,
) -> Result<ExitCode, String> {
    if json {
        json_output::print(status)?;
    } else if !ended_here {
        println!(
            "{queue}: replay job {} is {}",
            status.id,
            status.state.as_str()
        );
    } else {
        print_end(queue, status);
    }
    Ok(match status.outcome {
        Some(ReplayOutcome::StoppedOnFailures { .. }) => ExitCode::from(STOPPED_ON_FAILURES),
        _ => ExitCode::SUCCESS,
    })
}

/// Prints a job's steps as they change.
#[derive(Default)]
struct Printer {
    last: Option<(ReplayJobState, u64, bool)>,
    said_waiting: bool,
}

impl Printer {
    fn step(&mut self, status: &ReplayJobStatus) {
        let c = &status.counts;
        let now = (status.state, c.sent, status.canary.is_some());
        if self.last == Some(now) {
            return;
        }
        match status.state {
            ReplayJobState::Canary if c.sent > 0 && !self.said_waiting => {
                println!(
                    "canary: {} sent; waiting for their fates (up to {} s)",
                    c.sent,
                    status.plan.fate_timeout_ms / 1000
                );
                self.said_waiting = true;
            }
            ReplayJobState::Waves if self.last.is_some_and(|(_, _, judged)| !judged) => {
                println!("canary: {}; going on in waves", fates(status));
            }
            ReplayJobState::Waves => println!("waves: {} sent; {}", c.sent, fates(status)),
            ReplayJobState::Paused => println!("paused: {} sent; {}", c.sent, fates(status)),
            _ => {}
        }
        self.last = Some(now);
    }
}

/// The fates of a job's copies, in words.
fn fates(status: &ReplayJobStatus) -> String {
    let c = &status.counts;
    let mut text = format!(
        "{} handled, {} retrying, {} dead-lettered again, {} waiting",
        c.handled, c.retrying, c.dead_lettered, c.waiting
    );
    if c.discarded > 0 {
        text.push_str(&format!(", {} discarded", c.discarded));
    }
    text
}

fn print_end(queue: &str, status: &ReplayJobStatus) {
    let c = &status.counts;
    match &status.outcome {
        Some(ReplayOutcome::StoppedOnFailures { failing, of }) => {
            println!(
                "stopped: {failing} of {of} copies failed again, above {}%; {}",
                status.plan.stop_above * 100.0,
                fates(status)
            );
            for error in &status.errors {
                println!("  {}× {}", error.count, error.error);
            }
            println!(
                "{queue}: replay job {}: {} sent; the rest stays in the dead-letter queue, untouched",
                status.id, c.sent
            );
        }
        Some(ReplayOutcome::Stopped { by }) => println!(
            "{queue}: replay job {} stopped{}: {} sent; {}",
            status.id,
            by.as_ref().map(|b| format!(" by {b}")).unwrap_or_default(),
            c.sent,
            fates(status)
        ),
        _ => println!(
            "{queue}: replay job {} completed: {} sent; {}",
            status.id,
            c.sent,
            fates(status)
        ),
    }
}

fn print_jobs(queue: &str, jobs: &[ReplayJobStatus]) {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| {
            vec![
                job.id.clone(),
                job.state.as_str().to_owned(),
                job.by.clone().unwrap_or_else(|| "-".to_owned()),
                job.counts.sent.to_string(),
                job.counts.handled.to_string(),
                job.counts.failing().to_string(),
                job.counts.waiting.to_string(),
                job.errors
                    .first()
                    .map(|e| e.error.clone())
                    .unwrap_or_else(|| "-".to_owned()),
                job.selection.clone(),
            ]
        })
        .collect();
    table::print(
        &[
            "JOB",
            "STATE",
            "BY",
            "SENT",
            "HANDLED",
            "FAILING",
            "WAITING",
            "ERROR",
            "SELECTION",
        ],
        &rows,
    );
    println!("{queue}: {} replay jobs", jobs.len());
}
