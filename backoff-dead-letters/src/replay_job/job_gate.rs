//! [`JobGate`]: the watch a replay job keeps over a pass that sends its
//! copies: which message goes, with which number, and when to stop.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use lapin::BasicProperties;
use rabbit_backoff_core::{ReplayPlan, ReplayVerdict};
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::replay_marker;
use rabbit_backoff_runtime::transport::Channel;

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
    /// Messages left in the queue because the job may have sent them.
    pub(crate) kept_as_sent: u64,
    /// Originals removed because their copies had been confirmed.
    pub(crate) removed_as_sent: u64,
    /// Keys of confirmed copies not yet written, and since when.
    pub(crate) confirmed: Vec<u64>,
    pub(crate) confirmed_since: Option<tokio::time::Instant>,
}

/// Confirmed copies are written in batches of at most this many…
const CONFIRMED_BATCH: usize = 64;
/// …or this old.
const CONFIRMED_AGE: Duration = Duration::from_millis(100);

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
        if let Some(&seq) = entry.sent_keys.get(&key) {
            // Its copy was recorded as sent. When the broker confirmed it,
            // or a consumer saw it, the original's removal was lost (in a
            // broker restart, say): it goes now. Otherwise the copy may
            // not exist, and the original stays.
            if entry.confirmed_keys.contains(&key)
                || self.confirmed.contains(&key)
                || entry.tally.has_fate(seq)
            {
                self.removed_as_sent += 1;
                return Admit::Remove;
            }
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

    fn confirmed(&mut self, key: u64) -> BoxFuture<'_, Result<(), Error>> {
        self.confirmed.push(key);
        let since = *self
            .confirmed_since
            .get_or_insert_with(tokio::time::Instant::now);
        let due = self.confirmed.len() >= CONFIRMED_BATCH || since.elapsed() >= CONFIRMED_AGE;
        Box::pin(async move {
            if due {
                self.flush().await?;
            }
            Ok(())
        })
    }

    fn flush(&mut self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            if self.confirmed.is_empty() {
                return Ok(());
            }
            let record = ReplayRecord::Confirmed {
                job: self.job.clone(),
                keys: self.confirmed.clone(),
            };
            append(self.log, self.stream, &record).await?;
            self.confirmed.clear();
            self.confirmed_since = None;
            Ok(())
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
        .and_then(replay_marker)
        .is_some_and(|(marked, _)| marked == job)
}
