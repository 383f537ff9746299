//! [`Nodes`]: the nodes a transport tries, shared with the connections it
//! made: which node answered last, and which were left for having lost
//! their cluster's majority.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use rabbit_backoff_core::connect_order;

/// The nodes to try, in order, and what the connections made to them saw.
#[derive(Debug)]
pub(super) struct Nodes {
    /// The nodes' addresses.
    uris: Vec<String>,
    /// The node of the last successful connection: the first one tried next.
    current: AtomicUsize,
    /// Per node, whether a connection left it for having lost its cluster's
    /// majority, and no connection to it has been made since: such nodes
    /// are tried after every other.
    left: Mutex<Vec<bool>>,
}

impl Nodes {
    /// The nodes of `uris`, none connected to or left yet.
    pub(super) fn new(uris: Vec<String>) -> Self {
        Nodes {
            left: Mutex::new(vec![false; uris.len()]),
            uris,
            current: AtomicUsize::new(0),
        }
    }

    /// Their addresses, in order.
    pub(super) fn uris(&self) -> &[String] {
        &self.uris
    }

    /// The node of the last successful connection.
    pub(super) fn current(&self) -> usize {
        self.current.load(Ordering::Relaxed)
    }

    /// The order to try them in: from the node of the last connection on,
    /// the nodes left last.
    pub(super) fn order(&self) -> Vec<usize> {
        connect_order(self.uris.len(), self.current(), &lock(&self.left))
    }

    /// A connection to node `index` was made: it is tried first next, and
    /// no longer counts as left.
    pub(super) fn connected(&self, index: usize) {
        self.current.store(index, Ordering::Relaxed);
        if let Some(left) = lock(&self.left).get_mut(index) {
            *left = false;
        }
    }

    /// A connection left node `index`: it is tried last, and the next
    /// connect starts with node `next`, unless another connection was made
    /// meanwhile.
    pub(super) fn leave(&self, index: usize, next: usize) {
        if let Some(left) = lock(&self.left).get_mut(index) {
            *left = true;
        }
        let _ = self
            .current
            .compare_exchange(index, next, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The guarded value, whether or not a holder panicked.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
