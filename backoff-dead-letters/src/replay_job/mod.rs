//! Replay jobs: a replay that watches its own result. A job sends a canary
//! of the selected dead letters, waits until each copy has a fate (handled,
//! retrying or dead-lettered again, recorded by the consumer), and goes on
//! in waves only while the failures stay within its threshold; a sliding
//! window of the latest fates stops it when they rise. What it did not send
//! stays in the dead-letter queue, untouched.
//!
//! Everything a job knows is in its dead-letter queue's replay log (a
//! stream, `replay_log`): its start and selection, each copy it sends (by
//! the dead letter's key, written before the copy is published, so that a
//! driver that dies in between never sends it twice), the canary's
//! judgement, who paused,
//! resumed or stopped it, and how it ended; beside them, the fates the
//! consumers write. So its status reads the same from any process, a
//! driver that restarts finds it again, and a resumed job never sends what
//! its log says it sent. One job runs at a time on a queue, held by an
//! exclusive queue of its driver's connection (`job_lock`).
//!
//! The files: the log's records (`replay_record`), the log itself
//! (`replay_log`), the jobs as the log tells them (`job_book`), the lock
//! (`job_lock`), its metrics (`job_meters`), the gate over a pass (`job_gate`), the driver
//! (`job_driver`), the operators' view and controls (`replay_jobs`), and
//! the errors (`replay_job_error`).

pub(crate) mod job_book;
pub(crate) mod job_driver;
pub(crate) mod job_gate;
pub(crate) mod job_lock;
pub(crate) mod job_meters;
pub(crate) mod replay_job_error;
pub(crate) mod replay_jobs;
pub(crate) mod replay_log;
pub(crate) mod replay_record;
