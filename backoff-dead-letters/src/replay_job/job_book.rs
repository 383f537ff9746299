//! [`JobBook`]: the replay jobs of one dead-letter queue as its replay log
//! tells them, and [`ReplayJobStatus`], what it says of one.

use std::collections::{BTreeMap, HashMap, HashSet};

use lapin::BasicProperties;
use rabbit_backoff_core::{FateBatch, FateCounts, FateTally, ReplayPlan};
use serde::Serialize;

use super::replay_record::{
    CanaryVerdict, RECORD_CONTENT_TYPE, ReplayControl, ReplayOutcome, ReplayRecord,
};
use crate::filter_record::FilterRecord;

/// Where a replay job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ReplayJobState {
    /// Sending its canary, or waiting for the canary's fates.
    Canary,
    /// Sending the rest in waves, watching the latest fates.
    Waves,
    /// Paused by an operator: nothing is sent until it is resumed.
    Paused,
    /// Every selected message was sent.
    Completed,
    /// Stopped itself: too many copies failed again.
    StoppedOnFailures,
    /// Stopped by an operator.
    Stopped,
    /// Failed: see its outcome.
    Failed,
    /// Not ended, and nothing drives it any more (the command or console
    /// that ran it is gone): resume it or stop it.
    Interrupted,
}

impl ReplayJobState {
    /// Whether the job has ended.
    pub fn is_ended(self) -> bool {
        matches!(
            self,
            ReplayJobState::Completed
                | ReplayJobState::StoppedOnFailures
                | ReplayJobState::Stopped
                | ReplayJobState::Failed
        )
    }

    /// The state's name, as the command, the console and metrics write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayJobState::Canary => "canary",
            ReplayJobState::Waves => "waves",
            ReplayJobState::Paused => "paused",
            ReplayJobState::Completed => "completed",
            ReplayJobState::StoppedOnFailures => "stopped-on-failures",
            ReplayJobState::Stopped => "stopped",
            ReplayJobState::Failed => "failed",
            ReplayJobState::Interrupted => "interrupted",
        }
    }
}

/// An error the failing copies gave, with how many gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ErrorCount {
    /// The handler's error.
    pub error: String,
    /// How many failing copies gave it.
    pub count: u64,
}

/// The canary's judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CanaryReport {
    /// What it decided.
    pub verdict: CanaryVerdict,
    /// Failures among its fates.
    pub failing: u64,
    /// Its fates known when it was judged.
    pub of: u64,
}

/// An operator's request to a job, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ControlEntry {
    /// What was asked.
    pub action: ReplayControl,
    /// Who asked.
    pub by: Option<String>,
    /// When, RFC 3339.
    pub at: String,
}

/// A replay job as its replay log tells it: who started it, what it
/// selected, where it is, how its copies fare.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ReplayJobStatus {
    /// The job's id.
    pub id: String,
    /// Who started it.
    pub by: Option<String>,
    /// What it selected, as an operator reads it.
    pub selection: String,
    /// Its canary, threshold and window.
    pub plan: ReplayPlan,
    /// Its rate, in messages a second.
    pub rate: Option<f64>,
    /// Where it is.
    pub state: ReplayJobState,
    /// How its copies fare.
    pub counts: FateCounts,
    /// The errors of the copies failing now, most frequent first.
    pub errors: Vec<ErrorCount>,
    /// The canary's judgement, once made.
    pub canary: Option<CanaryReport>,
    /// When it started, RFC 3339.
    pub started_at: String,
    /// When it ended.
    pub ended_at: Option<String>,
    /// How it ended.
    pub outcome: Option<ReplayOutcome>,
    /// Who paused, resumed or stopped it, and when.
    pub controls: Vec<ControlEntry>,
}

/// One job in the book: its status, and what its driver needs to go on.
#[derive(Debug, Clone)]
pub(crate) struct JobEntry {
    pub(crate) status: ReplayJobStatus,
    pub(crate) selection: FilterRecord,
    pub(crate) to_exchange: Option<String>,
    pub(crate) to_routing_key: Option<String>,
    pub(crate) tally: FateTally,
    /// The dead-letter keys of the messages whose copies were confirmed.
    /// The copies recorded as sent: each dead letter's key, and its copy's
    /// number.
    pub(crate) sent_keys: HashMap<u64, u64>,
    /// The keys of the copies the broker confirmed.
    pub(crate) confirmed_keys: HashSet<u64>,
    /// The next copy's number.
    pub(crate) next_seq: u64,
    /// The latest control asked for.
    pub(crate) control: Option<ReplayControl>,
    /// Copies sent when the canary was judged.
    pub(crate) canary_sent: Option<u64>,
}

/// The replay jobs of one dead-letter queue, folded from its replay log.
#[derive(Debug, Default)]
pub(crate) struct JobBook {
    jobs: BTreeMap<String, JobEntry>,
}

impl JobBook {
    /// Takes in one message of the replay log: a job's record or a batch
    /// of fates (anything else, such as an end marker, is skipped).
    pub(crate) fn take(&mut self, properties: &BasicProperties, body: &[u8]) {
        let content_type = properties.content_type().as_ref().map(|c| c.as_str());
        match content_type {
            Some(RECORD_CONTENT_TYPE) => match serde_json::from_slice::<ReplayRecord>(body) {
                Ok(record) => self.record(record),
                Err(e) => tracing::debug!("a replay log record that does not read: {e}"),
            },
            Some(FateBatch::CONTENT_TYPE) => match serde_json::from_slice::<FateBatch>(body) {
                Ok(batch) => {
                    for fate in &batch.fates {
                        if let Some(entry) = self.jobs.get_mut(&fate.job) {
                            entry.tally.record(fate);
                        }
                    }
                }
                Err(e) => tracing::debug!("a batch of fates that does not read: {e}"),
            },
            _ => {}
        }
    }

    fn record(&mut self, record: ReplayRecord) {
        if let ReplayRecord::Started {
            job,
            by,
            selection,
            plan,
            rate,
            to_exchange,
            to_routing_key,
            at,
            resumed,
        } = &record
        {
            if *resumed && let Some(entry) = self.jobs.get_mut(job) {
                // A resumed job ends no more, whatever ended its driver.
                entry.status.ended_at = None;
                entry.status.outcome = None;
                return;
            }
            self.jobs.insert(
                job.clone(),
                JobEntry {
                    status: ReplayJobStatus {
                        id: job.clone(),
                        by: by.clone(),
                        selection: selection.describe(),
                        plan: plan.clone(),
                        rate: *rate,
                        state: ReplayJobState::Canary,
                        counts: FateCounts::default(),
                        errors: Vec::new(),
                        canary: None,
                        started_at: at.clone(),
                        ended_at: None,
                        outcome: None,
                        controls: Vec::new(),
                    },
                    selection: (**selection).clone(),
                    to_exchange: to_exchange.clone(),
                    to_routing_key: to_routing_key.clone(),
                    tally: FateTally::default(),
                    sent_keys: HashMap::new(),
                    confirmed_keys: HashSet::new(),
                    next_seq: 0,
                    control: None,
                    canary_sent: None,
                },
            );
            return;
        }
        let Some(entry) = self.jobs.get_mut(record.job()) else {
            return;
        };
        match record {
            ReplayRecord::Started { .. } => {}
            ReplayRecord::Sent { seq, key, .. } => {
                entry.tally.sent(seq);
                entry.sent_keys.insert(key, seq);
                entry.next_seq = entry.next_seq.max(seq + 1);
            }
            ReplayRecord::Withdrawn { seq, key, .. } => {
                entry.tally.withdraw(seq);
                entry.sent_keys.remove(&key);
            }
            ReplayRecord::Confirmed { keys, .. } => entry.confirmed_keys.extend(keys),
            ReplayRecord::Judged {
                verdict,
                failing,
                of,
                ..
            } => {
                entry.status.canary = Some(CanaryReport {
                    verdict,
                    failing,
                    of,
                });
                entry.canary_sent = Some(entry.next_seq);
            }
            ReplayRecord::Control { action, by, at, .. } => {
                entry.control = Some(action);
                entry.status.controls.push(ControlEntry { action, by, at });
            }
            ReplayRecord::Ended { outcome, at, .. } => {
                entry.status.ended_at = Some(at);
                entry.status.outcome = Some(outcome);
            }
        }
    }

    /// The job `id`, as folded so far (its status not brought up to date).
    pub(crate) fn get(&self, id: &str) -> Option<&JobEntry> {
        self.jobs.get(id)
    }

    /// The job `id`, its status brought up to date.
    pub(crate) fn entry(&self, id: &str) -> Option<JobEntry> {
        let mut entry = self.jobs.get(id)?.clone();
        entry.status = status_of(&entry);
        Some(entry)
    }

    /// Every job's status, the newest first.
    pub(crate) fn statuses(&self) -> Vec<ReplayJobStatus> {
        let mut statuses: Vec<ReplayJobStatus> = self.jobs.values().map(status_of).collect();
        statuses.sort_by(|a, b| b.started_at.cmp(&a.started_at));
        statuses
    }
}

/// The status of `entry`, its state and counts from its records and fates.
pub(crate) fn status_of(entry: &JobEntry) -> ReplayJobStatus {
    let mut status = entry.status.clone();
    status.counts = entry.tally.counts();
    status.errors = entry
        .tally
        .top_errors(3)
        .into_iter()
        .map(|(error, count)| ErrorCount { error, count })
        .collect();
    status.state = match &status.outcome {
        Some(outcome) => ended_state(outcome),
        None if entry.control == Some(ReplayControl::Pause) => ReplayJobState::Paused,
        // A canary judged to stop ends the job: it is not in its waves
        // while its end is written.
        None if status
            .canary
            .as_ref()
            .is_some_and(|c| c.verdict != CanaryVerdict::Stop) =>
        {
            ReplayJobState::Waves
        }
        None => ReplayJobState::Canary,
    };
    status
}

/// The state of a job that ended with `outcome`.
pub(crate) fn ended_state(outcome: &ReplayOutcome) -> ReplayJobState {
    match outcome {
        ReplayOutcome::Completed => ReplayJobState::Completed,
        ReplayOutcome::StoppedOnFailures { .. } => ReplayJobState::StoppedOnFailures,
        ReplayOutcome::Stopped { .. } => ReplayJobState::Stopped,
        ReplayOutcome::Failed { .. } => ReplayJobState::Failed,
    }
}
