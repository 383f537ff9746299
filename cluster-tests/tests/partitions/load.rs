//! The load: the orders mix published at a steady rate through the faults,
//! each message sent again until the broker confirms it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rabbit_backoff::prelude::*;
use tokio::time::Instant;

use crate::consumer::mixed;
use crate::run::SETTLE;

/// Messages published per second by the load.
const RATE: u64 = 100;

/// A publisher sending the orders mix at [`RATE`], each message again (same
/// `message_id`) until the broker confirms it; records what was confirmed.
pub(crate) struct Load {
    confirmed: Arc<Mutex<BTreeMap<u64, Instant>>>,
    /// Publishes that failed and were sent again.
    retries: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl Load {
    pub(crate) fn start(publisher: Arc<Publisher>, spec: &ConsumerSpec, run: &str) -> Load {
        let confirmed = Arc::new(Mutex::new(BTreeMap::new()));
        let retries = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let names = spec.names();
        let run = run.to_owned();
        let task = tokio::spawn({
            let (confirmed, retries, stop) = (confirmed.clone(), retries.clone(), stop.clone());
            async move {
                let mut sends = tokio::task::JoinSet::new();
                let mut tick = tokio::time::interval(Duration::from_millis(1000 / RATE));
                let mut id = 0;
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    while sends.try_join_next().is_some() {}
                    // At most a few seconds' worth waiting for confirms.
                    if sends.len() >= (RATE * 5) as usize {
                        continue;
                    }
                    let (publisher, confirmed, retries) =
                        (publisher.clone(), confirmed.clone(), retries.clone());
                    let (exchange, key) = (names.exchange.clone(), names.routing_key.clone());
                    let message_id = format!("{run}-{id}");
                    let job = mixed(id);
                    sends.spawn(async move {
                        // Bounded: a message never confirmed in time is
                        // simply not in the history.
                        let deadline = Instant::now() + SETTLE;
                        while Instant::now() < deadline {
                            let message = Outgoing::json(&job)
                                .expect("a job encodes")
                                .message_id(message_id.clone());
                            match publisher.publish(&exchange, &key, message).await {
                                Ok(_) => {
                                    confirmed.lock().unwrap().insert(job.id, Instant::now());
                                    return;
                                }
                                Err(_) => {
                                    retries.fetch_add(1, Ordering::Relaxed);
                                    tokio::time::sleep(Duration::from_millis(250)).await;
                                }
                            }
                        }
                    });
                    id += 1;
                }
                while sends.join_next().await.is_some() {}
                id
            }
        });
        Load {
            confirmed,
            retries,
            stop,
            task,
        }
    }

    /// Stops sending new messages, waits for the confirms of those sent;
    /// how many were sent.
    pub(crate) async fn finish(self) -> (u64, BTreeMap<u64, Instant>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let sent = self.task.await.expect("the load does not panic");
        let confirmed = self.confirmed.lock().unwrap().clone();
        (sent, confirmed, self.retries.load(Ordering::Relaxed))
    }
}
