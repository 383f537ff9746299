//! [`QueueLocks`]: one async lock per consumer's work queue, so that what
//! must not overlap on one queue runs one at a time there (and side by side
//! on different queues).

use std::collections::HashMap;
use std::sync::Arc;

/// One lock per queue, made on first use.
#[derive(Debug, Default)]
pub(crate) struct QueueLocks(std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl QueueLocks {
    /// Held until dropped; waits while another holds the lock of `queue`.
    pub(crate) async fn lock(&self, queue: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.0.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(locks.entry(queue.to_owned()).or_default())
        };
        lock.lock_owned().await
    }

    /// Whether the lock of `queue` is held now.
    pub(crate) fn is_held(&self, queue: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(queue)
            .is_some_and(|lock| lock.try_lock().is_err())
    }
}
