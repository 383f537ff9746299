//! [`ReplayJob`]: a replay that watches its own result. It sends a canary,
//! waits for the canary's fates, and goes on in waves only while the
//! copies' failures stay within its plan's threshold.

use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff_core::{ReplayPlan, ReplayVerdict};
use rabbit_backoff_runtime::clock::now_rfc3339;
use rabbit_backoff_runtime::toolkit::confirm_channel;
use rabbit_backoff_runtime::transport::Channel;

use super::job_book::{JobEntry, ReplayJobStatus, ended_state, status_of};
use super::job_gate::{Halt, JobGate, Stage};
use super::job_lock::JobLock;
use super::job_meters::JobMeters;
use super::replay_job_error::ReplayJobError;
use super::replay_log::{LogFollower, append, declare, read_book};
use super::replay_record::{CanaryVerdict, ReplayControl, ReplayOutcome, ReplayRecord};
use crate::dlq::Dlq;
use crate::filter::DeadLetterFilter;
use crate::filter_record::FilterRecord;
use crate::passes::replay_options::ReplayOptions;
use crate::passes::scan::{Mode, Sink};

/// How long a job waits for its log to be read to its end before it
/// starts.
const CATCH_UP: Duration = Duration::from_secs(60);

/// How often a waiting job looks at its fates and controls again.
const LOOK_AGAIN: Duration = Duration::from_millis(100);

/// A replay job that holds its dead-letter queue's replay lock: started
/// by [`Dlq::start_replay`] or [`Dlq::resume_replay`], driven to its end
/// by [`run`](Self::run).
pub struct ReplayJob {
    dlq: Dlq,
    id: String,
    lock: JobLock,
    follower: LogFollower,
    log: Arc<dyn Channel>,
    stream: String,
    filter: DeadLetterFilter,
    options: ReplayOptions,
    plan: ReplayPlan,
    meters: JobMeters,
}

impl Dlq {
    /// Starts a watched replay of the messages `filter` selects, sent as
    /// `options` say, following `plan`: takes the queue's replay lock (one
    /// job at a time), declares its replay log and records the job there.
    /// Nothing is sent until [`ReplayJob::run`].
    ///
    /// ```no_run
    /// use rabbit_backoff::ConsumerSpec;
    /// use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, ReplayOptions};
    /// use rabbit_backoff::rules::{ReplayPlan, parse_threshold};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let spec = ConsumerSpec::new("orders", "5s,15s,60s".parse()?);
    /// let dlq = Dlq::connect("amqp://guest:guest@127.0.0.1:5672/%2f", &spec).await?;
    /// let plan = ReplayPlan::new(20, parse_threshold("10%")?)?;
    /// let options = ReplayOptions::default().rate(50.0).by("alice");
    /// let job = dlq.start_replay(&DeadLetterFilter::default(), &options, &plan).await?;
    /// let status = job.run(&mut |status| println!("{:?}", status.state)).await?;
    /// println!("{} sent, {} failing", status.counts.sent, status.counts.failing());
    /// # Ok(()) }
    /// ```
    pub async fn start_replay(
        &self,
        filter: &DeadLetterFilter,
        options: &ReplayOptions,
        plan: &ReplayPlan,
    ) -> Result<ReplayJob, ReplayJobError> {
        if let Some(rate) = options.rate {
            rabbit_backoff_core::parse_rate(&rate.to_string())?;
        }
        let id = job_id();
        let record = ReplayRecord::Started {
            job: id.clone(),
            by: options.by.clone(),
            selection: Box::new(FilterRecord::of(filter)),
            plan: plan.clone(),
            rate: options.rate,
            to_exchange: options.to_exchange.clone(),
            to_routing_key: options.to_routing_key.clone(),
            at: now_rfc3339(),
            resumed: false,
        };
        self.open_job(id, record, filter.clone(), options.clone(), plan.clone())
            .await
    }

    /// Takes over job `id`, which nothing drives any more (its command or
    /// console is gone): it goes on where its log says it was, and never
    /// sends a message its log says it sent.
    pub async fn resume_replay(
        &self,
        id: &str,
        by: Option<&str>,
    ) -> Result<ReplayJob, ReplayJobError> {
        let stream = self.names.replay_log();
        let unknown = || ReplayJobError::Unknown {
            job: id.to_owned(),
            queue: self.names.dead_letter_queue.clone(),
        };
        let book = read_book(&*self.connection, &stream)
            .await?
            .ok_or_else(unknown)?;
        let entry = book.entry(id).ok_or_else(unknown)?;
        if entry.status.state.is_ended() {
            return Err(ReplayJobError::Ended {
                job: id.to_owned(),
                state: entry.status.state.as_str(),
                action: "resume",
            });
        }
        let filter = entry.selection.filter().ok_or_else(|| {
            ReplayJobError::Refused(format!(
                "replay job {id}'s selection no longer reads; stop it and start another"
            ))
        })?;
        let options = ReplayOptions {
            to_exchange: entry.to_exchange.clone(),
            to_routing_key: entry.to_routing_key.clone(),
            rate: entry.status.rate,
            by: by.map(str::to_owned).or(entry.status.by.clone()),
            ..ReplayOptions::default()
        };
        let record = ReplayRecord::Started {
            job: id.to_owned(),
            by: options.by.clone(),
            selection: Box::new(entry.selection.clone()),
            plan: entry.status.plan.clone(),
            rate: options.rate,
            to_exchange: options.to_exchange.clone(),
            to_routing_key: options.to_routing_key.clone(),
            at: now_rfc3339(),
            resumed: true,
        };
        let plan = entry.status.plan.clone();
        self.open_job(id.to_owned(), record, filter, options, plan)
            .await
    }

    async fn open_job(
        &self,
        id: String,
        record: ReplayRecord,
        filter: DeadLetterFilter,
        options: ReplayOptions,
        plan: ReplayPlan,
    ) -> Result<ReplayJob, ReplayJobError> {
        let stream = self.names.replay_log();
        declare(&*self.connection, &self.names).await?;
        let Some(lock) = JobLock::take(
            (&*self.connection, &self.replay_locks),
            &self.names.replay_lock(),
        )
        .await?
        else {
            let running = self.running_job().await.ok().flatten();
            return Err(ReplayJobError::Busy {
                queue: self.names.dead_letter_queue.clone(),
                job: running,
            });
        };
        let opened = async {
            let log = confirm_channel(&*self.connection, &stream).await?;
            append(&*log, &stream, &record).await?;
            let mut follower = LogFollower::start(&*self.connection, &stream).await?;
            follower.caught_up(&stream, CATCH_UP).await?;
            Ok::<_, ReplayJobError>((log, follower))
        }
        .await;
        let (log, follower) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                lock.release().await;
                return Err(e);
            }
        };
        Ok(ReplayJob {
            meters: JobMeters::start(&self.names.dead_letter_queue),
            dlq: self.clone(),
            id,
            lock,
            follower,
            log,
            stream,
            filter,
            options,
            plan,
        })
    }
}

impl ReplayJob {
    /// The job's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Drives the job to its end: the canary, its judgement, then the
    /// waves, pausing and stopping as operators ask (through
    /// [`Dlq::control_replay`], from anywhere); calls `progress` with the
    /// job's status at each step and about once a second while it waits.
    /// The lock is released at the end, however the job ended.
    pub async fn run(
        mut self,
        progress: &mut (dyn FnMut(&ReplayJobStatus) + Send),
    ) -> Result<ReplayJobStatus, ReplayJobError> {
        let outcome = match self.drive(progress).await {
            Ok(outcome) => outcome,
            Err(e) => ReplayOutcome::Failed {
                error: e.to_string(),
            },
        };
        let ended = ReplayRecord::Ended {
            job: self.id.clone(),
            outcome: outcome.clone(),
            at: now_rfc3339(),
        };
        let written = append(&*self.log, &self.stream, &ended).await;
        // The follower reads the end before it stops, when it can.
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while self.status().is_some_and(|status| status.outcome.is_none()) {
                tokio::time::sleep(LOOK_AGAIN).await;
            }
        })
        .await;
        let mut status = self.status();
        if let Some(status) = &mut status {
            status.state = ended_state(&outcome);
            status.outcome = Some(outcome.clone());
            status.ended_at.get_or_insert_with(now_rfc3339);
        }
        self.follower.stop().await;
        self.log.close().await;
        self.lock.release().await;
        self.meters.ended(ended_state(&outcome));
        written?;
        let status = status.ok_or_else(|| {
            ReplayJobError::Refused(format!("replay job {} left its log", self.id))
        })?;
        self.meters.show(&status);
        progress(&status);
        match outcome {
            ReplayOutcome::Failed { error } => Err(ReplayJobError::Refused(format!(
                "replay job {} failed: {error}",
                self.id
            ))),
            _ => Ok(status),
        }
    }

    /// What `read` finds in the job's entry of the log, as read now;
    /// `None` before the log shows the job.
    fn entry<T>(&self, read: impl FnOnce(&JobEntry) -> T) -> Option<T> {
        let book = self.follower.book.lock().unwrap_or_else(|e| e.into_inner());
        book.get(&self.id).map(read)
    }

    /// The job's status as its log tells it now.
    fn status(&self) -> Option<ReplayJobStatus> {
        self.entry(status_of)
    }

    fn next_seq(&self) -> u64 {
        self.entry(|entry| entry.next_seq).unwrap_or(0)
    }

    fn canary_sent(&self) -> Option<u64> {
        self.entry(|entry| entry.canary_sent).flatten()
    }

    fn control(&self) -> Option<ReplayControl> {
        self.entry(|entry| entry.control).flatten()
    }

    fn stopped_by(&self) -> Option<String> {
        self.entry(|entry| {
            entry
                .status
                .controls
                .iter()
                .rev()
                .find(|c| c.action == ReplayControl::Stop)
                .and_then(|c| c.by.clone())
        })
        .flatten()
    }

    fn report(&self, progress: &mut (dyn FnMut(&ReplayJobStatus) + Send)) {
        if let Some(status) = self.status() {
            self.meters.show(&status);
            progress(&status);
        }
    }

    /// The canary, its judgement and the waves; how the job ended.
    async fn drive(
        &mut self,
        progress: &mut (dyn FnMut(&ReplayJobStatus) + Send),
    ) -> Result<ReplayOutcome, ReplayJobError> {
        let limit = self.filter.limit;
        if self.canary_sent().is_none() {
            let sent = self.next_seq();
            let canary = u64::from(self.plan.canary);
            if sent < canary {
                let want = (canary - sent) as usize;
                let want = limit.map_or(want, |l| want.min(l.saturating_sub(sent as usize)));
                let halt = self
                    .pass_reporting(Stage::Canary, Some(want), progress)
                    .await?;
                if let Some(outcome) = self.halted(halt, progress).await? {
                    return Ok(outcome);
                }
            }
            let canary = self.next_seq();
            if canary == 0 {
                return Ok(ReplayOutcome::Completed);
            }
            self.report(progress);
            if let Some(outcome) = self.judge_canary(canary, progress).await? {
                return Ok(outcome);
            }
        }
        loop {
            if let Some(outcome) = self.halted(None, progress).await? {
                return Ok(outcome);
            }
            let sent = self.next_seq() as usize;
            if limit.is_some_and(|l| sent >= l) {
                return Ok(ReplayOutcome::Completed);
            }
            let halt = self
                .pass_reporting(Stage::Waves, limit.map(|l| l - sent), progress)
                .await?;
            self.report(progress);
            match halt {
                None => return Ok(ReplayOutcome::Completed),
                Some(Halt::Failures { failing, of }) => {
                    return Ok(ReplayOutcome::StoppedOnFailures { failing, of });
                }
                Some(Halt::Control(_)) => {}
            }
        }
    }

    /// Waits while the job is paused; the outcome when an operator
    /// stopped it (or `halt` says it must stop).
    async fn halted(
        &self,
        halt: Option<Halt>,
        progress: &mut (dyn FnMut(&ReplayJobStatus) + Send),
    ) -> Result<Option<ReplayOutcome>, ReplayJobError> {
        if let Some(Halt::Failures { failing, of }) = halt {
            return Ok(Some(ReplayOutcome::StoppedOnFailures { failing, of }));
        }
        let mut reported = tokio::time::Instant::now();
        loop {
            match self.control() {
                Some(ReplayControl::Stop) => {
                    return Ok(Some(ReplayOutcome::Stopped {
                        by: self.stopped_by(),
                    }));
                }
                Some(ReplayControl::Pause) => {
                    self.check_follower()?;
                    if reported.elapsed() >= Duration::from_secs(1) {
                        self.report(progress);
                        reported = tokio::time::Instant::now();
                    }
                    tokio::time::sleep(LOOK_AGAIN).await;
                }
                _ => return Ok(None),
            }
        }
    }

    fn check_follower(&self) -> Result<(), ReplayJobError> {
        match self.follower.failure() {
            Some(e) => Err(ReplayJobError::Refused(format!(
                "the replay log `{}` can no longer be read: {e}",
                self.stream
            ))),
            None => Ok(()),
        }
    }

    /// Waits for the fates of the first `canary` copies (at most the
    /// plan's fate timeout) and judges them; the outcome when the job
    /// stops there.
    async fn judge_canary(
        &self,
        canary: u64,
        progress: &mut (dyn FnMut(&ReplayJobStatus) + Send),
    ) -> Result<Option<ReplayOutcome>, ReplayJobError> {
        let deadline = tokio::time::Instant::now() + self.plan.fate_timeout_duration();
        let mut reported = tokio::time::Instant::now();
        let verdict = loop {
            if let Some(outcome) = self.halted(None, progress).await? {
                return Ok(Some(outcome));
            }
            self.check_follower()?;
            let waited_out = tokio::time::Instant::now() >= deadline;
            let verdict = self.entry(|entry| entry.tally.canary(&self.plan, canary, waited_out));
            match verdict {
                Some(ReplayVerdict::Wait) | None => {
                    if reported.elapsed() >= Duration::from_secs(1) {
                        self.report(progress);
                        reported = tokio::time::Instant::now();
                    }
                    tokio::time::sleep(LOOK_AGAIN).await;
                }
                Some(verdict) => break verdict,
            }
        };
        let (verdict, failing, of) = match verdict {
            ReplayVerdict::Stop { failing, of } => (CanaryVerdict::Stop, failing, of),
            ReplayVerdict::GoUnwatched => (CanaryVerdict::Unwatched, 0, 0),
            _ => {
                let counts = self.status().map(|s| s.counts).unwrap_or_default();
                (
                    CanaryVerdict::Go,
                    counts.failing(),
                    counts.sent - counts.waiting,
                )
            }
        };
        let judged = ReplayRecord::Judged {
            job: self.id.clone(),
            verdict,
            failing,
            of,
            at: now_rfc3339(),
        };
        append(&*self.log, &self.stream, &judged).await?;
        while self.canary_sent().is_none() {
            self.check_follower()?;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.report(progress);
        Ok((verdict == CanaryVerdict::Stop)
            .then_some(ReplayOutcome::StoppedOnFailures { failing, of }))
    }

    /// [`pass`](Self::pass), calling `progress` about once a second while
    /// it sends.
    async fn pass_reporting(
        &self,
        stage: Stage,
        limit: Option<usize>,
        progress: &mut (dyn FnMut(&ReplayJobStatus) + Send),
    ) -> Result<Option<Halt>, ReplayJobError> {
        let pass = self.pass(stage, limit);
        tokio::pin!(pass);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tokio::select! {
                halt = &mut pass => return halt,
                _ = tick.tick() => self.report(progress),
            }
        }
    }

    /// One pass over the dead-letter queue that sends at most `limit`
    /// copies; why it stopped sending, if it stopped before the end.
    async fn pass(
        &self,
        stage: Stage,
        limit: Option<usize>,
    ) -> Result<Option<Halt>, ReplayJobError> {
        let mut filter = self.filter.clone();
        filter.limit = limit;
        let mut gate = JobGate {
            job: self.id.clone(),
            stage,
            plan: &self.plan,
            book: Arc::clone(&self.follower.book),
            log: &*self.log,
            stream: &self.stream,
            next_seq: self.next_seq(),
            halt: None,
            kept_as_sent: 0,
            removed_as_sent: 0,
            confirmed: Vec::new(),
            confirmed_since: None,
        };
        let mut visit = |_: &_, _: &_| Ok(());
        self.dlq
            .scan_gated(
                &filter,
                Mode::Replay(&self.options),
                Sink::Visit(&mut visit),
                Some(&mut gate),
            )
            .await?;
        if gate.kept_as_sent > 0 {
            tracing::warn!(
                "{}: replay job {} left {} messages in the queue whose copies it had sent \
                 before it was interrupted, unconfirmed: they may be in the work queue too",
                self.dlq.names.dead_letter_queue,
                self.id,
                gate.kept_as_sent
            );
        }
        if gate.removed_as_sent > 0 {
            tracing::info!(
                "{}: replay job {} removed {} messages whose copies it had sent, and the \
                 broker confirmed, before it was interrupted",
                self.dlq.names.dead_letter_queue,
                self.id,
                gate.removed_as_sent
            );
        }
        // The follower has read every copy's record before the next step
        // counts them.
        let sent = gate.next_seq;
        while self.next_seq() < sent {
            self.check_follower()?;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(gate.halt)
    }
}

/// A job id an operator can read and type: the UTC time it started and
/// four hex digits, `20261207-081500-3f2a`.
fn job_id() -> String {
    let stamp: String = now_rfc3339()
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .take(15)
        .map(|c| if c == 'T' { '-' } else { c })
        .collect();
    format!("{stamp}-{:04x}", fastrand::u16(..))
}
