//! [`ReplayFate`]: what became of one replayed message, as its consumer
//! recorded it.

use serde::{Deserialize, Serialize};

use crate::decision::Decision;

/// What a consumer did with a replayed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Fate {
    /// The handler succeeded; the message was acked.
    Handled,
    /// The handler failed with a transient error; the message waits for a
    /// retry.
    Retrying,
    /// The handler failed for good, or the retries ran out; the message is
    /// in the dead-letter queue again.
    DeadLettered,
    /// The handler said the message is obsolete; it was dropped.
    Discarded,
}

impl Fate {
    /// Every fate, in the order a status lists them.
    pub const ALL: [Fate; 4] = [
        Fate::Handled,
        Fate::Retrying,
        Fate::DeadLettered,
        Fate::Discarded,
    ];

    /// Whether the fate counts against the replay: it failed again.
    ///
    /// ```
    /// use rabbit_backoff_core::Fate;
    ///
    /// assert!(Fate::Retrying.is_failure());
    /// assert!(Fate::DeadLettered.is_failure());
    /// assert!(!Fate::Handled.is_failure());
    /// assert!(!Fate::Discarded.is_failure());
    /// ```
    pub fn is_failure(self) -> bool {
        matches!(self, Fate::Retrying | Fate::DeadLettered)
    }

    /// The fate of a delivery settled as `decision` decided.
    ///
    /// ```
    /// use rabbit_backoff_core::{Decision, Fate};
    ///
    /// assert_eq!(Fate::of(&Decision::Ack), Fate::Handled);
    /// assert_eq!(Fate::of(&Decision::Retry { delay_ms: 5_000, next_count: 1 }), Fate::Retrying);
    /// ```
    pub fn of(decision: &Decision) -> Fate {
        match decision {
            Decision::Ack => Fate::Handled,
            Decision::Discard => Fate::Discarded,
            Decision::Retry { .. } | Decision::Redeliver { .. } | Decision::Hold { .. } => {
                Fate::Retrying
            }
            Decision::DeadLetter { .. } => Fate::DeadLettered,
        }
    }

    /// The fate's name, as the status report and metrics write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Handled => "handled",
            Fate::Retrying => "retrying",
            Fate::DeadLettered => "dead-lettered",
            Fate::Discarded => "discarded",
        }
    }
}

/// The fate of one replayed message: which job sent it (its id), which
/// copy it is (the job numbers its copies from 0), what became of it and,
/// for a failure, the error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReplayFate {
    /// The replay job's id.
    pub job: String,
    /// The copy's number in its job.
    pub seq: u64,
    /// What became of it.
    pub fate: Fate,
    /// The handler's error, for a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ReplayFate {
    /// The fate `fate` of copy `seq` of job `job`.
    ///
    /// ```
    /// use rabbit_backoff_core::{Fate, ReplayFate};
    ///
    /// let fate = ReplayFate::new("r-1", 7, Fate::DeadLettered, Some("db down".into()));
    /// assert_eq!(fate.seq, 7);
    /// ```
    pub fn new(job: impl Into<String>, seq: u64, fate: Fate, error: Option<String>) -> Self {
        ReplayFate {
            job: job.into(),
            seq,
            fate,
            error,
        }
    }
}

/// Many fates in one message of the replay log, as a consumer's writer
/// sends them: JSON, `{"fates":[…]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FateBatch {
    /// The fates, in the order they were recorded.
    pub fates: Vec<ReplayFate>,
}

impl FateBatch {
    /// The content type of a fate batch's message.
    pub const CONTENT_TYPE: &'static str = "application/x-rabbit-backoff-replay-fates+json";

    /// A batch of `fates`.
    pub fn new(fates: Vec<ReplayFate>) -> Self {
        FateBatch { fates }
    }
}
