//! [`JobLock`]: one replay job at a time on a dead-letter queue, held as
//! an exclusive queue of the driver's connection
//! (`<dead-letter queue>.replays.lock`), which the broker releases when the
//! driver's connection ends, however it ends. The broker lets the owner of
//! an exclusive queue declare it again, so the locks a connection holds are
//! also kept beside it ([`ReplayLocks`]), for its other users.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{channel_error, confirm_channel};
use rabbit_backoff_runtime::transport::{Channel, Connection, RESOURCE_LOCKED};

/// The replay locks one connection holds, shared by its users.
#[derive(Clone, Default)]
pub(crate) struct ReplayLocks(Arc<Mutex<HashSet<String>>>);

impl ReplayLocks {
    fn holds(&self, name: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }

    /// Records `name` as held; false when it already was.
    fn hold(&self, name: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned())
    }

    fn release(&self, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }
}

/// The held lock: released when dropped with its connection, or by
/// [`release`](Self::release).
pub(crate) struct JobLock {
    channel: Arc<dyn Channel>,
    name: String,
    locks: ReplayLocks,
}

impl JobLock {
    /// Takes the lock `name` (`TopologyNames::replay_lock`) on `connection`;
    /// `Ok(None)` when another connection
    /// holds it (a job runs).
    pub(crate) async fn take(
        (connection, locks): (&dyn Connection, &ReplayLocks),
        name: &str,
    ) -> Result<Option<JobLock>, Error> {
        let name = name.to_owned();
        // A job of this connection holds it.
        if !locks.hold(&name) {
            return Ok(None);
        }
        let taken = async {
            // A refusal closes its channel: one of its own.
            let channel = confirm_channel(connection, &name).await?;
            match channel.declare_exclusive(&name).await {
                Ok(()) => Ok(Some(channel)),
                Err(e) if e.code() == Some(RESOURCE_LOCKED) => Ok(None),
                Err(e) => {
                    channel.close().await;
                    Err(channel_error(&name, "taking the replay lock")(e))
                }
            }
        }
        .await;
        match taken {
            Ok(Some(channel)) => Ok(Some(JobLock {
                channel,
                name,
                locks: locks.clone(),
            })),
            other => {
                locks.release(&name);
                other.map(|_| None)
            }
        }
    }

    /// Whether a driver holds the lock now (taking it for a moment when
    /// no one does).
    pub(crate) async fn held(
        (connection, locks): (&dyn Connection, &ReplayLocks),
        name: &str,
    ) -> Result<bool, Error> {
        if locks.holds(name) {
            return Ok(true);
        }
        match JobLock::take((connection, locks), name).await? {
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
        self.locks.release(&self.name);
    }
}
