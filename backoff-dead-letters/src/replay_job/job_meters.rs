//! A replay job's progress as metrics, through the `metrics` facade (a
//! no-op until the process installs a recorder): gauges of the job that
//! runs from this process on a dead-letter queue, labelled by that `queue`
//! (one job runs at a time on a queue), and a counter of jobs ended, by
//! outcome. The consumers count the fates they record themselves
//! (`rabbit_backoff_replay_fates_total`, by consumer and fate).

use metrics::{Gauge, counter, gauge};

use super::job_book::{ReplayJobState, ReplayJobStatus};

/// Copies the running job sent, by dead-letter `queue`.
pub const REPLAY_SENT: &str = "rabbit_backoff_replay_sent";
/// Of those, the copies handled.
pub const REPLAY_HANDLED: &str = "rabbit_backoff_replay_handled";
/// Of those, the copies that failed again (retrying, dead-lettered again).
pub const REPLAY_FAILING: &str = "rabbit_backoff_replay_failing";
/// Of those, the copies with no fate yet.
pub const REPLAY_WAITING: &str = "rabbit_backoff_replay_waiting";
/// 1 while a job runs from this process on the dead-letter `queue` (paused
/// or not), 0 once it ended.
pub const REPLAY_RUNNING: &str = "rabbit_backoff_replay_running";
/// 1 while that job is paused.
pub const REPLAY_PAUSED: &str = "rabbit_backoff_replay_paused";
/// Replay jobs ended, by dead-letter `queue` and `outcome` (`completed`,
/// `stopped-on-failures`, `stopped`, `failed`).
pub const REPLAY_JOBS: &str = "rabbit_backoff_replay_jobs_total";

/// The handles of one job's gauges.
pub(crate) struct JobMeters {
    queue: String,
    sent: Gauge,
    handled: Gauge,
    failing: Gauge,
    waiting: Gauge,
    running: Gauge,
    paused: Gauge,
}

impl JobMeters {
    /// The gauges of a job on the dead-letter queue `queue`, which starts.
    pub(crate) fn start(queue: &str) -> Self {
        let labels = [("queue", queue.to_owned())];
        let meters = JobMeters {
            queue: queue.to_owned(),
            sent: gauge!(REPLAY_SENT, &labels),
            handled: gauge!(REPLAY_HANDLED, &labels),
            failing: gauge!(REPLAY_FAILING, &labels),
            waiting: gauge!(REPLAY_WAITING, &labels),
            running: gauge!(REPLAY_RUNNING, &labels),
            paused: gauge!(REPLAY_PAUSED, &labels),
        };
        meters.running.set(1.0);
        meters
    }

    /// The job's status now.
    pub(crate) fn show(&self, status: &ReplayJobStatus) {
        let counts = &status.counts;
        self.sent.set(counts.sent as f64);
        self.handled.set(counts.handled as f64);
        self.failing.set(counts.failing() as f64);
        self.waiting.set(counts.waiting as f64);
        let paused = status.state == ReplayJobState::Paused;
        self.paused.set(if paused { 1.0 } else { 0.0 });
        self.running
            .set(if status.state.is_ended() { 0.0 } else { 1.0 });
    }

    /// The job ended in `state`.
    pub(crate) fn ended(&self, state: ReplayJobState) {
        self.running.set(0.0);
        self.paused.set(0.0);
        let labels = [
            ("queue", self.queue.clone()),
            ("outcome", state.as_str().to_owned()),
        ];
        counter!(REPLAY_JOBS, &labels).increment(1);
    }
}
