//! [`JobGate`]: the watch a replay job keeps over a pass that sends its
//! copies: which message goes, with which number, and when to stop.

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use lapin::BasicProperties;
use rabbit_backoff_core::{HeaderValue, ReplayPlan, ReplayVerdict, headers};
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::transport::{Channel, header_view};

use super::job_book::JobBook;
use super::replay_log::append;
use super::replay_record::{ReplayControl, ReplayRecord};
use crate::passes::replay_gate::{Admit, ReplayGate};

/// What a job's pass is sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The canary: as many as the pass's limit, unjudged.
    Canary,
    /// The waves: judged on the latest fates before each copy.
    Waves,
}

/// Why a job's pass stopped sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Halt {
    /// An operator asked for a pause or a stop.
    Control(ReplayControl),
    /// Too many of the latest fates are failures.
    Failures { failing: u64, of: u64 },
}

/// The gate of one pass of a job.
pub(crate) struct JobGate<'a> {
    pub(crate) job: String,
    pub(crate) stage: Stage,
    pub(crate) plan: &'a ReplayPlan,
    pub(crate) book: Arc<Mutex<JobBook>>,
    pub(crate) log: &'a dyn Channel,
    pub(crate) stream: &'a str,
    /// The next copy's number.
    pub(crate) next_seq: u64,
    /// Why the pass stopped sending, if it did.
    pub(crate) halt: Option<Halt>,
    /// Messages left in the queue because the job had sent them already.
    pub(crate) kept_as_sent: u64,
}

impl JobGate<'_> {
    /// What the job's records and fates say before the next copy.
    fn judge(&mut self, key: u64, properties: &BasicProperties) -> Admit {
        if carries_job(properties, &self.job) {
            // One of the job's own copies, dead-lettered again: its fate
            // is known; the job never sends a message twice.
            return Admit::Keep;
        }
        let book = self.book.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = book.get(&self.job) else {
            return Admit::Stop;
        };
        if entry.sent_keys.contains(&key) {
            self.kept_as_sent += 1;
            return Admit::Keep;
        }
        if let Some(control @ (ReplayControl::Pause | ReplayControl::Stop)) = entry.control {
            self.halt = Some(Halt::Control(control));
            return Admit::Stop;
        }
        if self.stage == Stage::Waves
            && let ReplayVerdict::Stop { failing, of } = entry.tally.waves(self.plan)
        {
            self.halt = Some(Halt::Failures { failing, of });
            return Admit::Stop;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        Admit::Send(seq)
    }
}

impl ReplayGate for JobGate<'_> {
    fn job(&self) -> &str {
        &self.job
    }

    fn admit<'b>(
        &'b mut self,
        key: u64,
        properties: &'b BasicProperties,
    ) -> BoxFuture<'b, Result<Admit, Error>> {
        let admit = self.judge(key, properties);
        Box::pin(async move {
            if let Admit::Send(seq) = admit {
                let record = ReplayRecord::Sent {
                    job: self.job.clone(),
                    seq,
                    key,
                };
                append(self.log, self.stream, &record).await?;
            }
            Ok(admit)
        })
    }

    fn withdrawn(&mut self, key: u64, seq: u64) -> BoxFuture<'_, Result<(), Error>> {
        let record = ReplayRecord::Withdrawn {
            job: self.job.clone(),
            seq,
            key,
        };
        Box::pin(async move { append(self.log, self.stream, &record).await })
    }
}

/// Whether `properties` carry the marker of job `job`.
pub(crate) fn carries_job(properties: &BasicProperties, job: &str) -> bool {
    properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(headers::REPLAY_JOB))
        .is_some_and(|v| matches!(header_view(v), HeaderValue::Str(s) if s == job))
}
