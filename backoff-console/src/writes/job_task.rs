//! A replay job driven by this console: a task of its own runs it to its
//! end on the job's own connection (held by nothing else, so that no
//! request waits on it), then closes that connection and records the end
//! in the audit log.

use std::sync::Arc;

use rabbit_backoff_dead_letters::{Dlq, ReplayJob, ReplayJobStatus, ReplayOutcome};

use super::audit_entry::{AuditEntry, AuditSelection};
use super::job_action::JobAction;
use crate::state::State;

/// Drives `job`, started or taken over on `dlq` (a connection of its own)
/// by `who`, to its end on a task of its own; then closes `dlq` and records
/// the end as `who`'s, with `selection` and how it ended.
pub(crate) fn spawn(
    state: Arc<State>,
    queue: String,
    who: String,
    selection: AuditSelection,
    dlq: Dlq,
    job: ReplayJob,
) {
    let id = job.id().to_owned();
    tokio::spawn(async move {
        let ended = job.run(&mut |_: &ReplayJobStatus| {}).await;
        dlq.close().await;
        let mut entry = AuditEntry::new(&who, JobAction::End.name(), &queue, selection);
        entry.job = Some(id);
        match ended {
            Ok(status) => {
                entry.count = status.counts.sent as usize;
                entry.note = Some(ending(&status));
            }
            Err(e) => entry.error = Some(e.to_string()),
        }
        // A failure to record is printed by `record`; nobody waits for it.
        let _ = state.record(&entry).await;
    });
}

/// How a job ended, in words: its state, what it sent and how the copies
/// fare, and the errors of those failing.
pub(crate) fn ending(status: &ReplayJobStatus) -> String {
    let c = &status.counts;
    let mut text = status.state.as_str().to_owned();
    match &status.outcome {
        Some(ReplayOutcome::StoppedOnFailures { failing, of }) => {
            text.push_str(&format!(": {failing} of {of} copies failed again"));
        }
        Some(ReplayOutcome::Stopped { by: Some(by) }) => text.push_str(&format!(" by {by}")),
        _ => {}
    }
    text.push_str(&format!(
        "; {} sent: {} handled, {} failing, {} waiting",
        c.sent,
        c.handled,
        c.failing(),
        c.waiting
    ));
    if c.discarded > 0 {
        text.push_str(&format!(", {} discarded", c.discarded));
    }
    for error in &status.errors {
        text.push_str(&format!("; {}× {}", error.count, error.error));
    }
    text
}
