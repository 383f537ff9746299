//! [`Cleanup`]: what a test declared on the broker, deleted when the test
//! ends, even when it panicked (tests share the broker).

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::{Connection, ConnectionProperties};
use rabbit_backoff_core::{ConsumerSpec, Topology};

use crate::broker::url;

/// Deletes queues and exchanges when dropped, even when the test panicked.
#[derive(Default)]
pub struct Cleanup {
    /// The queues to delete.
    pub queues: Vec<String>,
    /// The exchanges to delete, after the queues.
    pub exchanges: Vec<String>,
    /// Where to delete them: a node or a comma-separated list of nodes (the
    /// first that answers); the test broker when `None`.
    pub at: Option<String>,
}

impl Cleanup {
    /// Every queue and exchange of `spec`'s topology, and the replay log
    /// and lock a replay job declares beside its dead-letter queue.
    pub fn of(spec: &ConsumerSpec) -> Self {
        let topology = Topology::of(spec);
        let names = spec.names();
        Cleanup {
            queues: topology
                .every_queue()
                .map(|q| q.name.clone())
                .chain([names.replay_lock(), names.replay_log()])
                .collect(),
            exchanges: topology
                .exchanges()
                .iter()
                .map(|e| e.name.clone())
                .collect(),
            at: None,
        }
    }

    /// Deletes on the broker at `uri` (one node, or a comma-separated list).
    pub fn at(mut self, uri: &str) -> Self {
        self.at = Some(uri.to_owned());
        self
    }

    /// And the queue `name`.
    pub fn queue(mut self, name: &str) -> Self {
        self.queues.push(name.to_owned());
        self
    }

    /// And the exchange `name`.
    pub fn exchange(mut self, name: &str) -> Self {
        self.exchanges.push(name.to_owned());
        self
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let queues = std::mem::take(&mut self.queues);
        let exchanges = std::mem::take(&mut self.exchanges);
        let at = self.at.take().unwrap_or_else(url);
        apart(async move {
            let mut connected = None;
            for node in at.split(',') {
                if let Ok(c) =
                    Connection::connect(node.trim(), ConnectionProperties::default()).await
                {
                    connected = Some(c);
                    break;
                }
            }
            let Some(connection) = connected else {
                return;
            };
            let Ok(channel) = connection.create_channel().await else {
                return;
            };
            for q in queues {
                let _ = channel
                    .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                    .await;
            }
            for e in exchanges {
                let _ = channel
                    .exchange_delete(e.as_str().into(), ExchangeDeleteOptions::default())
                    .await;
            }
            let _ = connection.close(200, "cleanup".into()).await;
        });
    }
}

/// Runs `work` to its end on a thread and runtime of its own, and waits for
/// it: what a `Drop` does to clean up, since a test's runtime cannot block
/// on itself.
pub fn apart(work: impl Future<Output = ()> + Send + 'static) {
    let worker = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the clean-up")
            .block_on(work)
    });
    let _ = worker.join();
}
