//! The inbox in the process's memory, on tokio's clock.

use std::collections::HashMap;
use std::future::ready;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use crate::dedupe::StoreError;
use crate::dedupe::plain_held::{Plain, PlainHeld};
use crate::dedupe::store::{Claim, ClaimRequest, DedupeStore};

/// How many claims pass between two sweeps of expired keys.
const SWEEP_EVERY: u64 = 1_000;

/// An inbox in memory: for tests, and for a single process that accepts
/// forgetting its keys when it restarts. Time is tokio's, so that it works
/// under paused time (`rabbit_backoff::testing`): advancing the clock past
/// the window forgets a key. Clones share the same keys.
///
/// ```
/// use rabbit_backoff::dedupe::MemoryStore;
///
/// let store = MemoryStore::new();
/// assert_eq!(store.remembered(), 0);
/// ```
#[derive(Clone, Default)]
pub struct MemoryStore {
    keys: Arc<Mutex<Keys>>,
}

#[derive(Default)]
struct Keys {
    entries: HashMap<(String, String), Entry>,
    claims: u64,
    next_token: u64,
}

enum Entry {
    /// Claimed by the delivery holding this token.
    Held(u64),
    /// Completed; a duplicate until then.
    Done(Instant),
}

impl MemoryStore {
    /// An empty inbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many keys it holds or remembers as completed (expired ones may
    /// linger until the next sweep, every 1000 claims).
    pub fn remembered(&self) -> usize {
        let now = Instant::now();
        self.lock()
            .entries
            .values()
            .filter(|e| match e {
                Entry::Held(_) => true,
                Entry::Done(until) => *until > now,
            })
            .count()
    }

    fn lock(&self) -> MutexGuard<'_, Keys> {
        crate::dedupe::lock(&self.keys)
    }
}

impl DedupeStore for MemoryStore {
    fn claim<'a>(&'a self, request: ClaimRequest<'a>) -> BoxFuture<'a, Result<Claim, StoreError>> {
        let now = Instant::now();
        let mut keys = self.lock();
        keys.claims += 1;
        if keys.claims.is_multiple_of(SWEEP_EVERY) {
            keys.entries
                .retain(|_, e| !matches!(e, Entry::Done(until) if *until <= now));
        }
        let id = (request.consumer.to_owned(), request.key.to_owned());
        let claim = match keys.entries.get(&id) {
            Some(Entry::Held(_)) => Claim::InProgress,
            Some(Entry::Done(until)) if *until > now => Claim::Duplicate,
            _ => {
                keys.next_token += 1;
                let token = keys.next_token;
                keys.entries.insert(id.clone(), Entry::Held(token));
                Claim::Claimed(Box::new(Plain(MemoryHeld {
                    store: self.clone(),
                    id,
                    token,
                    window: request.window,
                    settled: false,
                })))
            }
        };
        Box::pin(ready(Ok(claim)))
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(ready(Ok(())))
    }

    fn describe(&self) -> String {
        String::from("memory")
    }
}

struct MemoryHeld {
    store: MemoryStore,
    id: (String, String),
    token: u64,
    window: std::time::Duration,
    settled: bool,
}

impl MemoryHeld {
    /// Sets the key to completed, or (with `None`) frees it, if it is still ours.
    fn settle(&mut self, done: Option<Instant>) {
        self.settled = true;
        let mut keys = self.store.lock();
        if matches!(keys.entries.get(&self.id), Some(Entry::Held(t)) if *t == self.token) {
            match done {
                Some(until) => {
                    keys.entries.insert(self.id.clone(), Entry::Done(until));
                }
                None => {
                    keys.entries.remove(&self.id);
                }
            }
        }
    }
}

impl PlainHeld for MemoryHeld {
    fn done(mut self) -> BoxFuture<'static, Result<(), StoreError>> {
        let until = Instant::now() + self.window;
        self.settle(Some(until));
        Box::pin(ready(Ok(())))
    }

    fn free(mut self) -> BoxFuture<'static, Result<(), StoreError>> {
        self.settle(None);
        Box::pin(ready(Ok(())))
    }
}

impl Drop for MemoryHeld {
    fn drop(&mut self) {
        if !self.settled {
            self.settle(None);
        }
    }
}
