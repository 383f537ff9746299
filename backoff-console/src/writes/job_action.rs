//! [`JobAction`]: what the audit log records of a replay job: its start,
//! an operator's pause, resume or stop, and its end.

use rabbit_backoff_dead_letters::ReplayControl;

/// Something done to, or by, a replay job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobAction {
    /// Started by an operator, driven by this console.
    Start,
    /// Paused: it sends nothing more until resumed.
    Pause,
    /// Resumed where it paused, or taken over when nothing drove it.
    Resume,
    /// Stopped for good.
    Stop,
    /// Its driver in this console saw it end.
    End,
}

impl JobAction {
    /// Its name in the audit log.
    pub(crate) fn name(self) -> &'static str {
        match self {
            JobAction::Start => "replay-job",
            JobAction::Pause => "replay-job-pause",
            JobAction::Resume => "replay-job-resume",
            JobAction::Stop => "replay-job-stop",
            JobAction::End => "replay-job-end",
        }
    }

    /// The control it asks of the job, for an operator's pause, resume or
    /// stop.
    pub(crate) fn control(self) -> Option<ReplayControl> {
        match self {
            JobAction::Pause => Some(ReplayControl::Pause),
            JobAction::Resume => Some(ReplayControl::Resume),
            JobAction::Stop => Some(ReplayControl::Stop),
            JobAction::Start | JobAction::End => None,
        }
    }
}
