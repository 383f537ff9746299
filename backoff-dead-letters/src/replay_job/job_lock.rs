//! [`JobLock`]: one replay job at a time on a dead-letter queue, held as
//! an exclusive queue of the driver's connection
//! (`<dead-letter queue>.replays.lock`), which the broker releases when the
//! driver's connection ends, however it ends.

use std::sync::Arc;

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{channel_error, confirm_channel};
use rabbit_backoff_runtime::transport::{Channel, Connection, RESOURCE_LOCKED};

/// The lock of the replay jobs of the dead-letter queue whose replay log
/// is `log`.
fn lock_name(log: &str) -> String {
    format!("{log}.lock")
}

/// The held lock: released when dropped with its connection, or by
/// [`release`](Self::release).
pub(crate) struct JobLock {
    channel: Arc<dyn Channel>,
    name: String,
}

impl JobLock {
    /// Takes the lock on `connection`; `Ok(None)` when another connection
    /// holds it (a job runs).
    pub(crate) async fn take(
        connection: &dyn Connection,
        log: &str,
    ) -> Result<Option<JobLock>, Error> {
        let name = lock_name(log);
        // A refusal closes its channel: one of its own.
        let channel = confirm_channel(connection, &name).await?;
        match channel.declare_exclusive(&name).await {
            Ok(()) => Ok(Some(JobLock { channel, name })),
            Err(e) if e.code() == Some(RESOURCE_LOCKED) => Ok(None),
            Err(e) => {
                channel.close().await;
                Err(channel_error(&name, "taking the replay lock")(e))
            }
        }
    }

    /// Whether a driver holds the lock now (taking it for a moment when
    /// no one does).
    pub(crate) async fn held(connection: &dyn Connection, log: &str) -> Result<bool, Error> {
        match JobLock::take(connection, log).await? {
            Some(lock) => {
                lock.release().await;
                Ok(false)
            }
            None => Ok(true),
        }
    }

    /// Releases the lock.
    pub(crate) async fn release(self) {
        let _ = self.channel.delete_queue(&self.name).await;
        self.channel.close().await;
    }
}
