//! The replay jobs of a dead-letter queue, as operators watch and steer
//! them: their statuses, and pause, resume and stop from anywhere.

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::clock::now_rfc3339;
use rabbit_backoff_runtime::toolkit::confirm_channel;

use super::job_book::{JobBook, ReplayJobState, ReplayJobStatus};
use super::job_lock::JobLock;
use super::replay_job_error::ReplayJobError;
use super::replay_log::{append, read_book};
use super::replay_record::{ReplayControl, ReplayOutcome, ReplayRecord};
use crate::dlq::Dlq;

impl Dlq {
    /// Every replay job in the dead-letter queue's replay log, the newest
    /// first; a job that has not ended and that nothing drives any more is
    /// [`Interrupted`](ReplayJobState::Interrupted). Empty when no job was
    /// ever started.
    pub async fn replay_jobs(&self) -> Result<Vec<ReplayJobStatus>, Error> {
        let stream = self.names.replay_log();
        let Some(book) = read_book(&*self.connection, &stream).await? else {
            return Ok(Vec::new());
        };
        self.with_drivers(&book).await
    }

    /// The replay job `id`.
    pub async fn replay_job(&self, id: &str) -> Result<ReplayJobStatus, ReplayJobError> {
        self.replay_jobs()
            .await?
            .into_iter()
            .find(|job| job.id == id)
            .ok_or_else(|| ReplayJobError::Unknown {
                job: id.to_owned(),
                queue: self.names.dead_letter_queue.clone(),
            })
    }

    /// Asks replay job `id` to pause, resume or stop, recorded in its log
    /// with `by`. A running job reads it within a moment, from wherever it
    /// runs. An interrupted job is stopped here; one cannot be resumed
    /// from here ([`resume_replay`](Self::resume_replay) drives it again).
    pub async fn control_replay(
        &self,
        id: &str,
        action: ReplayControl,
        by: Option<&str>,
    ) -> Result<ReplayJobStatus, ReplayJobError> {
        let job = self.replay_job(id).await?;
        if job.state.is_ended() {
            return Err(ReplayJobError::Ended {
                job: id.to_owned(),
                state: job.state.as_str(),
                action: action.as_str(),
            });
        }
        let interrupted = job.state == ReplayJobState::Interrupted;
        if interrupted && action == ReplayControl::Resume {
            return Err(ReplayJobError::Refused(format!(
                "replay job {id} is interrupted (nothing drives it); take it over with \
                 `dlq replay --resume {id}`, which drives it from that command"
            )));
        }
        let stream = self.names.replay_log();
        let channel = confirm_channel(&*self.connection, &stream).await?;
        let written = async {
            let at = now_rfc3339();
            append(
                &*channel,
                &stream,
                &ReplayRecord::Control {
                    job: id.to_owned(),
                    action,
                    by: by.map(str::to_owned),
                    at: at.clone(),
                },
            )
            .await?;
            if interrupted && action == ReplayControl::Stop {
                append(
                    &*channel,
                    &stream,
                    &ReplayRecord::Ended {
                        job: id.to_owned(),
                        outcome: ReplayOutcome::Stopped {
                            by: by.map(str::to_owned),
                        },
                        at,
                    },
                )
                .await?;
            }
            Ok::<_, Error>(())
        }
        .await;
        channel.close().await;
        written?;
        self.replay_job(id).await
    }

    /// The id of the job that runs now, if one does.
    pub(crate) async fn running_job(&self) -> Result<Option<String>, Error> {
        Ok(self
            .replay_jobs()
            .await?
            .into_iter()
            .find(|job| !job.state.is_ended() && job.state != ReplayJobState::Interrupted)
            .map(|job| job.id))
    }

    /// The statuses of `book`: of the jobs not ended, only the newest can
    /// run, and only while a driver holds the lock.
    async fn with_drivers(&self, book: &JobBook) -> Result<Vec<ReplayJobStatus>, Error> {
        let mut statuses = book.statuses();
        let held = JobLock::held(
            (&*self.connection, &self.replay_locks),
            &self.names.replay_lock(),
        )
        .await?;
        let mut running = held;
        for status in &mut statuses {
            if status.state.is_ended() {
                continue;
            }
            if running {
                running = false;
            } else {
                status.state = ReplayJobState::Interrupted;
            }
        }
        Ok(statuses)
    }
}
