//! [`Health`]: whether the runtime is connected and consuming, watched
//! through a [`HealthWatch`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// The state of a [`Runtime`](crate::Runtime), for readiness probes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Health {
    /// Connecting and declaring the topology.
    Starting,
    /// Every consumer is consuming.
    Ready,
    /// The connection or a channel was lost; reconnecting.
    Recovering,
    /// A consumer's circuit breaker tripped: it does not consume until a
    /// probe succeeds (the queue named here; the others keep consuming).
    Paused(String),
    /// The dedupe store does not answer (why, here): at start-up the runtime
    /// waits for it before consuming; while running, deliveries of the
    /// consumers with `dedupe` are requeued after a pause, never handled
    /// without their key, until a claim succeeds again.
    StoreUnavailable(String),
    /// The node connected to cannot serve every consumer (why, here: a
    /// consumer with `retry = "delayed"` or `"scheduled"` on a node before
    /// RabbitMQ 4.3, as during a rolling upgrade): the runtime left it, and
    /// tries the other nodes, then this one again, with the reconnection
    /// backoff, until one can.
    WaitingForNode(String),
    /// A shutdown was asked for; handlers in flight are finishing.
    Stopping,
    /// Stopped cleanly.
    Stopped,
    /// Stopped on an error, described here.
    Failed(String),
}

/// Watches a runtime's [`Health`]; cheap to clone.
///
/// ```no_run
/// # async fn demo(runtime: rabbit_backoff::Runtime) {
/// let health = runtime.health();
/// tokio::spawn(runtime.run());
/// health.wait_ready().await.expect("the consumers started");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct HealthWatch {
    receiver: watch::Receiver<Health>,
    reconnects: Arc<AtomicU64>,
    node: Arc<Mutex<Option<String>>>,
    ready_once: Arc<AtomicBool>,
}

impl HealthWatch {
    pub(crate) fn channel() -> (watch::Sender<Health>, HealthWatch) {
        let (sender, receiver) = watch::channel(Health::Starting);
        (
            sender,
            HealthWatch {
                receiver,
                reconnects: Arc::default(),
                node: Arc::default(),
                ready_once: Arc::default(),
            },
        )
    }

    /// Records that every consumer consumed, once.
    pub(crate) fn became_ready(&self) {
        self.ready_once.store(true, Ordering::Relaxed);
    }

    /// Whether every consumer has consumed since the runtime started: a
    /// node that cannot serve them is then waited out, not a reason to end.
    pub(crate) fn was_ready(&self) -> bool {
        self.ready_once.load(Ordering::Relaxed)
    }

    /// Records the node the runtime is connected to.
    pub(crate) fn connected_to(&self, node: String) {
        if let Ok(mut current) = self.node.lock() {
            *current = Some(node);
        }
    }

    /// The broker node of the current connection (of a cluster's list, the
    /// one that answered), without a password; `None` before the first
    /// connection.
    pub fn node(&self) -> Option<String> {
        self.node.lock().ok().and_then(|n| n.clone())
    }

    /// Counts one lost connection or channel that the runtime recovers from.
    pub(crate) fn count_reconnect(&self) {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the runtime has had to connect again since it was
    /// built: after a lost connection or channel, or a failed attempt to
    /// connect.
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    /// The current state.
    pub fn current(&self) -> Health {
        self.receiver.borrow().clone()
    }

    /// Whether every consumer is consuming.
    pub fn is_ready(&self) -> bool {
        *self.receiver.borrow() == Health::Ready
    }

    /// Waits until the runtime is ready (through any number of reconnection
    /// attempts, and while the dedupe store does not answer); `Err` with the
    /// state it reached instead when it stopped or failed first.
    pub async fn wait_ready(&self) -> Result<(), Health> {
        let mut receiver = self.receiver.clone();
        let reached = receiver
            .wait_for(|h| {
                !matches!(
                    h,
                    Health::Starting
                        | Health::Recovering
                        | Health::StoreUnavailable(_)
                        | Health::WaitingForNode(_)
                )
            })
            .await
            .map(|h| h.clone())
            .unwrap_or(Health::Stopped);
        match reached {
            Health::Ready => Ok(()),
            other => Err(other),
        }
    }

    /// Waits for the next change and returns the new state; `None` once the
    /// runtime is gone.
    pub async fn changed(&mut self) -> Option<Health> {
        self.receiver.changed().await.ok()?;
        Some(self.current())
    }
}
