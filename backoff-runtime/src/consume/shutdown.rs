//! [`ShutdownHandle`]: stops a running runtime gracefully, from anywhere.

use tokio::sync::watch;

/// Stops a running [`Runtime`](crate::Runtime) gracefully: consumers stop
/// taking deliveries, handlers in flight finish within the grace period and
/// settle their messages, then the connection closes.
///
/// Cloneable; any clone can trigger the shutdown, and triggering twice is harmless.
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    sender: watch::Sender<bool>,
}

impl Default for ShutdownHandle {
    fn default() -> Self {
        ShutdownHandle::new()
    }
}

impl ShutdownHandle {
    /// A handle not yet asked to stop. A runtime makes its own
    /// ([`Runtime::shutdown_handle`](crate::Runtime::shutdown_handle)); this
    /// one serves code of your own that stops the same way.
    pub fn new() -> Self {
        ShutdownHandle {
            sender: watch::Sender::new(false),
        }
    }

    /// Asks the runtime to stop.
    pub fn shutdown(&self) {
        self.sender.send_replace(true);
    }

    /// Whether a shutdown was asked for.
    pub fn is_shutdown(&self) -> bool {
        *self.sender.borrow()
    }

    /// Resolves once a shutdown is asked for.
    pub async fn wait(&self) {
        let mut receiver = self.sender.subscribe();
        // An error means the sender is gone, which cannot happen while `self` lives.
        let _ = receiver.wait_for(|stop| *stop).await;
    }
}
