//! Concurrent reads of the same thing share one pass: the first caller runs
//! it, the others wait for its result. Nothing is kept once it is done, so
//! the next read after it reads the queue again.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

/// Calls in flight, by key.
#[derive(Debug)]
pub(crate) struct SingleFlight<K, V> {
    in_flight: Mutex<HashMap<K, Arc<OnceCell<V>>>>,
}

impl<K, V> Default for SingleFlight<K, V> {
    fn default() -> Self {
        SingleFlight {
            in_flight: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone, V: Clone> SingleFlight<K, V> {
    /// The result of `run` for `key`, shared with every call for the same
    /// key made while it runs. Should the caller running it go away (a
    /// closed connection drops its future), one of those waiting runs it.
    pub(crate) async fn run<F>(&self, key: K, run: impl FnOnce() -> F) -> V
    where
        F: Future<Output = V>,
    {
        let cell = {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(in_flight.entry(key.clone()).or_default())
        };
        let value = cell.get_or_init(run).await.clone();
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if in_flight.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            in_flight.remove(&key);
        }
        value
    }

    /// How many keys are in flight.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.in_flight.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn concurrent_calls_share_one_run_and_later_ones_run_again() {
        let flights = SingleFlight::<&str, usize>::default();
        let runs = AtomicUsize::new(0);
        let run = || async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            runs.fetch_add(1, Ordering::SeqCst) + 1
        };
        let (a, b, c) = tokio::join!(
            flights.run("q", run),
            flights.run("q", run),
            flights.run("other", run)
        );
        assert_eq!(a, b, "one run for both");
        assert_ne!(a, c);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(flights.len(), 0, "nothing kept");
        assert_eq!(flights.run("q", run).await, 3, "a later call runs again");
    }
}
