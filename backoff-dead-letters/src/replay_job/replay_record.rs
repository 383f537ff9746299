//! [`ReplayRecord`]: what a replay job writes to its dead-letter queue's
//! replay log, beside the fates its copies' consumers write there.

use rabbit_backoff_core::ReplayPlan;
use serde::{Deserialize, Serialize};

use crate::filter_record::FilterRecord;

/// The content type of a replay job's record in the replay log (JSON).
pub(crate) const RECORD_CONTENT_TYPE: &str = "application/x-rabbit-backoff-replay+json";

/// What an operator asks of a running replay job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ReplayControl {
    /// Send nothing more until resumed; what was sent keeps its fate.
    Pause,
    /// Go on where it paused.
    Resume,
    /// Send nothing more, for good: what was not sent stays in the
    /// dead-letter queue.
    Stop,
}

impl ReplayControl {
    /// The word the command and the audit log use.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayControl::Pause => "pause",
            ReplayControl::Resume => "resume",
            ReplayControl::Stop => "stop",
        }
    }
}

/// How a replay job ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ReplayOutcome {
    /// Every selected message was sent.
    Completed,
    /// Too many of the copies failed again: `failing` of `of` judged.
    StoppedOnFailures {
        /// Failures among the fates judged.
        failing: u64,
        /// Fates judged.
        of: u64,
    },
    /// An operator stopped it.
    Stopped {
        /// Who stopped it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// It failed: the broker refused or lost the connection.
    Failed {
        /// Why.
        error: String,
    },
}

/// What the canary's judgement was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CanaryVerdict {
    /// Within the threshold: the waves follow.
    Go,
    /// No fate came: the waves follow, unwatched.
    Unwatched,
    /// Too many failed: the job stops.
    Stop,
}

/// One record of a replay job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "kebab-case")]
pub(crate) enum ReplayRecord {
    /// The job started (or was resumed, with the same id).
    Started {
        job: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        selection: Box<FilterRecord>,
        plan: ReplayPlan,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to_exchange: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to_routing_key: Option<String>,
        at: String,
        #[serde(default)]
        resumed: bool,
    },
    /// Copy `seq` of the dead letter with key `key` is sent: written
    /// before the copy is published, so that a driver that dies between
    /// the two never sends it again (the original then stays in the
    /// queue, and the copy's fate waits).
    Sent { job: String, seq: u64, key: u64 },
    /// Copy `seq` was not sent after all: the broker refused it, and its
    /// original stays in the queue.
    Withdrawn { job: String, seq: u64, key: u64 },
    /// The broker confirmed the copies of the dead letters with these
    /// keys: an original of one of them found in the queue again (its
    /// removal was lost, in a broker restart say) is removed without a
    /// second copy. Written in batches, at the latest when the pass ends.
    Confirmed { job: String, keys: Vec<u64> },
    /// The canary was judged.
    Judged {
        job: String,
        verdict: CanaryVerdict,
        failing: u64,
        of: u64,
        at: String,
    },
    /// An operator asked for `action`.
    Control {
        job: String,
        action: ReplayControl,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        at: String,
    },
    /// The job ended.
    Ended {
        job: String,
        #[serde(flatten)]
        outcome: ReplayOutcome,
        at: String,
    },
}

impl ReplayRecord {
    /// The job the record is about.
    pub(crate) fn job(&self) -> &str {
        match self {
            ReplayRecord::Started { job, .. }
            | ReplayRecord::Sent { job, .. }
            | ReplayRecord::Withdrawn { job, .. }
            | ReplayRecord::Confirmed { job, .. }
            | ReplayRecord::Judged { job, .. }
            | ReplayRecord::Control { job, .. }
            | ReplayRecord::Ended { job, .. } => job,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_as_written() {
        let records = [
            ReplayRecord::Sent {
                job: "j".into(),
                seq: 3,
                key: u64::MAX,
            },
            ReplayRecord::Ended {
                job: "j".into(),
                outcome: ReplayOutcome::StoppedOnFailures { failing: 3, of: 5 },
                at: "2026-12-07T08:00:00Z".into(),
            },
            ReplayRecord::Control {
                job: "j".into(),
                action: ReplayControl::Pause,
                by: Some("alice".into()),
                at: "2026-12-07T08:00:00Z".into(),
            },
        ];
        for record in records {
            let json = serde_json::to_string(&record).unwrap();
            assert_eq!(
                serde_json::from_str::<ReplayRecord>(&json).unwrap(),
                record,
                "{json}"
            );
        }
    }
}
