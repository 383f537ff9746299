//! [`Runtime`]: the running runtime, which connects, declares, consumes and
//! reconnects, generation after generation (one connection each, in
//! [`generation`](super::generation)), until shutdown.

use std::collections::HashSet;
use std::sync::Arc;

use rabbit_backoff_core::{ConsumerSpec, IndexFeed, Topology};

use crate::broker::index_writer::IndexWriter;
use crate::consume::shutdown::ShutdownHandle;
use crate::consume::state::StateMap;
use crate::error::Error;
use crate::lifecycle::broker_return::broker_returns;
use crate::lifecycle::health::{Health, HealthWatch};
use crate::lifecycle::registration::Registration;
use crate::lifecycle::settings::Settings;
use crate::telemetry::meters;
use crate::transport::{AmqpTransport, Connection, Transport};

/// Runs consumers until shutdown: declares every topology, then consumes.
///
/// Made by [`Runtime::builder`].
pub struct Runtime {
    pub(super) transport: Arc<dyn Transport>,
    /// The writer of the dead-letter indexes that the consumers write
    /// themselves (quorum topologies), started once the broker has been
    /// found able to serve every consumer, while [`run`](Self::run) runs.
    /// `None` once decided when no consumer writes an index.
    index_writer: tokio::sync::OnceCell<Option<IndexWriter>>,
    /// The writer's task, awaited when `run` ends.
    index_writer_task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    pub(super) consumers: Vec<Box<dyn Registration>>,
    pub(super) state: Arc<StateMap>,
    pub(super) settings: Settings,
    pub(super) shutdown: ShutdownHandle,
    pub(super) health: (tokio::sync::watch::Sender<Health>, HealthWatch),
}

/// A runtime running in the background, from
/// [`RuntimeBuilder::start`](super::builder::RuntimeBuilder::start).
pub struct RunningRuntime {
    health: HealthWatch,
    shutdown: ShutdownHandle,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl RunningRuntime {
    /// Its health.
    pub fn health(&self) -> HealthWatch {
        self.health.clone()
    }

    /// A handle that stops it.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Stops it gracefully and waits until it has stopped.
    pub async fn stop(self) -> Result<(), Error> {
        self.shutdown.shutdown();
        match self.task.await {
            Ok(result) => result,
            Err(join) => Err(Error::Stopped(join.to_string())),
        }
    }
}

impl Runtime {
    /// Starts running in the background and returns once every consumer is
    /// consuming, or with the error that ended start-up.
    pub async fn start(self) -> Result<RunningRuntime, Error> {
        let health = self.health();
        let shutdown = self.shutdown_handle();
        let task = tokio::spawn(self.run());
        match health.wait_ready().await {
            // A breaker that tripped once every consumer was consuming.
            Ok(()) | Err(Health::Paused(_)) => {}
            // Failed, or stopping or stopped by a shutdown: the task is
            // ending, with the error that ended start-up.
            Err(_) => {
                return match task.await {
                    Ok(Err(e)) => Err(e),
                    Ok(Ok(())) => Err(Error::Stopped("stopped during start-up".into())),
                    Err(join) => Err(Error::Stopped(join.to_string())),
                };
            }
        }
        Ok(RunningRuntime {
            health,
            shutdown,
            task,
        })
    }

    /// A runtime of `consumers` built with `settings`, reaching its broker
    /// through `transport`.
    pub(super) fn new(
        transport: Arc<dyn Transport>,
        consumers: Vec<Box<dyn Registration>>,
        state: StateMap,
        settings: Settings,
    ) -> Self {
        Runtime {
            index_writer: tokio::sync::OnceCell::new(),
            index_writer_task: std::sync::Mutex::new(None),
            transport,
            consumers,
            state: Arc::new(state),
            settings,
            shutdown: ShutdownHandle::new(),
            health: HealthWatch::channel(),
        }
    }

    /// A handle that stops this runtime gracefully.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Watches this runtime's health: starting, ready, stopping, stopped or failed.
    pub fn health(&self) -> HealthWatch {
        self.health.1.clone()
    }

    /// The specs of the registered consumers, after overrides.
    pub fn specs(&self) -> impl Iterator<Item = &ConsumerSpec> {
        self.consumers.iter().map(|c| c.spec())
    }

    /// Connects, declares every consumer's topology, then consumes until a
    /// shutdown is asked for (by a [`ShutdownHandle`], SIGINT or SIGTERM).
    /// Returns once every channel and the connection are closed.
    ///
    /// A lost connection or channel is recovered: the runtime reconnects with
    /// capped exponential backoff and jitter, and at once when a node that
    /// refused connections accepts them again (probed every 250 ms with a bare
    /// TCP connect), declares the topology again and resumes every consumer; [`health`](Self::health) says `Recovering`
    /// meanwhile. A broker that is down at start-up is waited for the same way.
    /// Only a misconfiguration, such as a topology conflict, ends `run` with an
    /// error: `docs/guarantees.md` lists every cause. A node that cannot
    /// serve every consumer (`retry = "delayed"` or `"scheduled"` before
    /// RabbitMQ 4.3) is left and waited out once the runtime has been ready,
    /// or while other listed nodes remain ([`Health::WaitingForNode`]).
    pub async fn run(mut self) -> Result<(), Error> {
        let health = self.health.0.clone();
        let signals = self
            .settings
            .handle_signals
            .then(|| tokio::spawn(shutdown_on_signal(self.shutdown.clone())));
        let result = self.supervise().await;
        if let Some(signals) = signals {
            signals.abort();
        }
        // The last entries are written, briefly, once no consumer holds
        // the writer.
        self.index_writer.take();
        let writer = self
            .index_writer_task
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(writer) = writer {
            let _ = writer.await;
        }
        health.send_replace(match &result {
            Ok(()) => Health::Stopped,
            Err(e) => Health::Failed(e.to_string()),
        });
        tracing::info!("stopped");
        result
    }

    /// The writer of the dead-letter indexes the consumers write
    /// ([`IndexFeed::Written`]) and of the fates of replayed copies,
    /// started the first time it is asked for, with the indexes to declare
    /// (it opens its connection at the first of them, or at its first
    /// record); `None` when the runtime has no consumer.
    pub(super) async fn index_writer(&self) -> Option<IndexWriter> {
        self.index_writer
            .get_or_init(|| async {
                let written: Vec<_> = self
                    .specs()
                    .filter_map(|spec| {
                        let topology = Topology::of(spec);
                        (topology.index_feed() == Some(IndexFeed::Written))
                            .then_some((topology.dead_letter_index, spec.declare))
                    })
                    .collect();
                self.specs().next()?;
                let (writer, task) = IndexWriter::start(Arc::clone(&self.transport));
                for (index, mode) in written {
                    writer.declare(index, mode).await;
                }
                *self
                    .index_writer_task
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(task);
                Some(writer)
            })
            .await
            .clone()
    }

    /// Runs generation after generation (one connection each) until shutdown.
    async fn supervise(&self) -> Result<(), Error> {
        let mut failures: u32 = 0;
        let mut unsuitable = UnsuitableNodes::default();
        loop {
            if self.shutdown.is_shutdown() {
                return Ok(());
            }
            if failures > 0 {
                let wait = self.settings.reconnect.delay(failures - 1, fastrand::f64());
                let returned = async {
                    match self.settings.reconnect_probe {
                        Some(probe) => broker_returns(&*self.transport, probe).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = self.shutdown.wait() => return Ok(()),
                    _ = tokio::time::sleep(wait) => {}
                    // A node that was down accepts connections again: connect
                    // now, and should the broker still be booting, start the
                    // backoff afresh rather than from where the outage left it.
                    _ = returned => failures = 0,
                }
            }
            let e = match self.generation(&mut failures).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let (health, next) = if e.is_recoverable() {
                let health = match &e {
                    Error::DedupeStore(why) => Health::StoreUnavailable(why.to_string()),
                    _ => Health::Recovering,
                };
                (health, "reconnecting")
            } else if e.is_node_unsuitable() {
                let node = self.health.1.node().unwrap_or_default();
                let nodes = self.transport.probe_addresses().len();
                if !unsuitable.wait_for_another(node, nodes, self.health.1.was_ready()) {
                    return Err(e);
                }
                (
                    Health::WaitingForNode(e.to_string()),
                    "left this node: trying the others, then this one again",
                )
            } else {
                return Err(e);
            };
            failures = failures.saturating_add(1);
            self.health.1.count_reconnect();
            meters::reconnected();
            self.health.0.send_replace(health);
            let wait = self.settings.reconnect.delay(failures - 1, 0.5);
            tracing::warn!("{e}; {next} (attempt {failures}, in about {wait:?})");
        }
    }
}

/// The nodes found unable to serve every consumer since the runtime
/// started, to tell a refusal that ends start-up from one that waits for
/// another node.
#[derive(Debug, Default)]
struct UnsuitableNodes(HashSet<String>);

impl UnsuitableNodes {
    /// Records that `node` (of `nodes` listed) cannot serve every consumer,
    /// and says whether to wait for another: always once the runtime has
    /// been ready (a failover or a rolling upgrade), else until every
    /// listed node has refused (a start-up on brokers that can never serve
    /// it ends with the refusal).
    fn wait_for_another(&mut self, node: String, nodes: usize, was_ready: bool) -> bool {
        self.0.insert(node);
        was_ready || self.0.len() < nodes
    }
}

/// Connects to the broker at `uri` (an `amqp://` address), naming the
/// connection `rabbit-backoff`, with a `frame_max` of at most
/// [`MAX_FRAME_SIZE`](crate::transport::MAX_FRAME_SIZE).
pub async fn connect(uri: &str) -> Result<Arc<dyn Connection>, Error> {
    let transport = AmqpTransport::new(uri);
    transport.connect().await.map_err(|source| Error::Connect {
        uri: transport.describe(),
        source,
    })
}

async fn shutdown_on_signal(shutdown: ShutdownHandle) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("signal received");
    shutdown.shutdown();
}
