//! [`Runtime`]: the builder of consumers, state and stores, and the running
//! runtime that connects, declares, consumes and reconnects.

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use rabbit_backoff_core::{
    ClusterEvidence, ConsumerSpec, IndexFeed, MetadataWatch, ReconnectBackoff, ReconnectProbe,
    RetryBackend, Topology,
};
use tokio::task::JoinSet;

use crate::broker::declare::establish_topology;
use crate::broker::held_retry_probe::check_broker_holds_retries;
use crate::broker::index_writer::IndexWriter;
use crate::broker::metadata_watch::watch_metadata;
use crate::consume::consumer::Consumer;
use crate::consume::dedupe::StoreReport;
use crate::consume::extract::transaction_requirement;
use crate::consume::shutdown::ShutdownHandle;
use crate::consume::state::{StateMap, StateRequirement};
use crate::consume::worker::{PauseReport, Worker, WorkerEnv};
use crate::dedupe::DedupeStore;
use crate::error::Error;
use crate::lifecycle::broker_return::broker_returns;
use crate::lifecycle::health::{Health, HealthWatch};
use crate::lifecycle::outbox_relay::relay_outbox;
use crate::telemetry::meters;
use crate::transport::AmqpTransport;
use crate::transport::{Connection, HOLDING_CHANNELS_BUILT, Transport};

/// The default broker address: `amqp://guest:guest@127.0.0.1:5672/%2f`.
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The broker address from `AMQP_URL`, or [`DEFAULT_AMQP_URL`].
pub fn amqp_url_from_env() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| DEFAULT_AMQP_URL.to_owned())
}

/// Builds a [`Runtime`]: the broker address, the consumers, their shared state
/// and run-time overrides.
///
/// ```no_run
/// # use rabbit_backoff::{Consumer, Runtime};
/// # async fn demo(process_order: impl Consumer) -> Result<(), rabbit_backoff::Error> {
/// Runtime::builder()
///     .uri("amqp://guest:guest@127.0.0.1:5672/%2f")
///     .consumer_with(process_order, |spec| spec.prefetch = 50)
///     .run()
///     .await
/// # }
/// ```
#[must_use = "a builder does nothing until .run() or .build()"]
pub struct RuntimeBuilder {
    uri: Option<String>,
    transport: Option<Arc<dyn Transport>>,
    consumers: Vec<Box<dyn Registration>>,
    state: StateMap,
    settings: Settings,
}

/// Runs consumers until shutdown: declares every topology, then consumes.
///
/// Made by [`Runtime::builder`].
pub struct Runtime {
    transport: Arc<dyn Transport>,
    /// The writer of the dead-letter indexes that the consumers write
    /// themselves (quorum topologies), started once the broker has been
    /// found able to serve every consumer, while [`run`](Self::run) runs.
    /// `None` once decided when no consumer writes an index.
    index_writer: tokio::sync::OnceCell<Option<IndexWriter>>,
    /// The writer's task, awaited when `run` ends.
    index_writer_task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    consumers: Vec<Box<dyn Registration>>,
    state: Arc<StateMap>,
    settings: Settings,
    shutdown: ShutdownHandle,
    health: (tokio::sync::watch::Sender<Health>, HealthWatch),
}

/// What a [`RuntimeBuilder`] sets and its [`Runtime`] runs with, beside
/// the broker and the consumers.
struct Settings {
    /// How long a copy's confirmation is awaited.
    confirm_timeout: Duration,
    /// How long a shutdown waits for the handlers in flight.
    shutdown_grace: Duration,
    /// Whether SIGINT and SIGTERM stop the runtime.
    handle_signals: bool,
    /// The pauses between reconnection attempts.
    reconnect: ReconnectBackoff,
    /// How often a down broker is probed between reconnection attempts.
    reconnect_probe: Option<ReconnectProbe>,
    /// The inbox of the consumers with `dedupe` (once built: when one of
    /// them has it).
    dedupe_store: Option<Arc<dyn DedupeStore>>,
    /// Whether each connection watches that its node reaches the cluster's
    /// majority.
    metadata_watch: WatchChoice,
}

/// Whether the runtime runs the metadata watch.
#[derive(Debug, Clone, Copy)]
enum WatchChoice {
    /// With the default settings when the broker address lists several
    /// nodes (there is another to go to), else not.
    Auto,
    /// As set by [`RuntimeBuilder::metadata_watch`].
    Set(Option<MetadataWatch>),
}

/// A runtime running in the background, from [`RuntimeBuilder::start`].
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

    /// A builder with the defaults: `AMQP_URL` or the local broker, a 30 s
    /// confirm timeout, a 30 s shutdown grace period, SIGINT/SIGTERM handled.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder {
            uri: None,
            transport: None,
            consumers: Vec::new(),
            state: StateMap::default(),
            settings: Settings {
                confirm_timeout: Duration::from_secs(30),
                shutdown_grace: Duration::from_secs(30),
                handle_signals: true,
                reconnect: ReconnectBackoff::default(),
                reconnect_probe: Some(ReconnectProbe::default()),
                dedupe_store: None,
                metadata_watch: WatchChoice::Auto,
            },
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
    /// ([`IndexFeed::Written`]), started the first time it is asked for,
    /// with their indexes to declare; `None` when no consumer writes one.
    async fn index_writer(&self) -> Option<IndexWriter> {
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
                if written.is_empty() {
                    return None;
                }
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

    /// The metadata watch each connection runs, if any.
    fn metadata_watch(&self) -> Option<MetadataWatch> {
        match self.settings.metadata_watch {
            WatchChoice::Set(watch) => watch,
            // On when the address list names several nodes, as the
            // classic-on-cluster warning counts them.
            WatchChoice::Auto => ClusterEvidence::of_addresses(&self.transport.probe_addresses())
                .map(|_| MetadataWatch::default()),
        }
    }

    /// One connection's life: connect, declare, consume until shutdown (Ok)
    /// or until a consumer or the connection fails (Err).
    async fn generation(&self, failures: &mut u32) -> Result<(), Error> {
        let connection = self
            .transport
            .connect()
            .await
            .map_err(|source| Error::Connect {
                uri: self.transport.describe(),
                source,
            })?;
        self.health.1.connected_to(connection.node());
        let stop = ShutdownHandle::new();
        // From the start: declaring the topology on a node cut off from the
        // majority would wait for as long as the cut lasts. It ends with the
        // generation, or leaves the node (which ends the generation).
        if let Some(watch) = self.metadata_watch() {
            let (connection, stop) = (Arc::clone(&connection), stop.clone());
            tokio::spawn(async move {
                let stopped = async { stop.wait().await };
                watch_metadata(connection, watch, stopped).await;
            });
        }
        let result = self.consume(&connection, &stop, failures).await;
        stop.shutdown();
        match &result {
            // The next connect tries the other nodes first.
            Err(e) if e.is_node_unsuitable() => connection.leave(&e.to_string()).await,
            _ => connection.close().await,
        }
        result
    }

    async fn consume(
        &self,
        connection: &Arc<dyn Connection>,
        stop: &ShutdownHandle,
        failures: &mut u32,
    ) -> Result<(), Error> {
        // Whether the node can serve every consumer, before anything is
        // declared: a refused start declares nothing, indexes included.
        for spec in self.specs() {
            if spec.retry != RetryBackend::Tiers {
                check_broker_holds_retries(&**connection, &spec.queue, spec.retry).await?;
            }
        }
        let index_writer = self.index_writer().await;
        for spec in self.specs() {
            establish_topology(&**connection, &Topology::of(spec), spec.declare).await?;
        }
        if let Some(store) = &self.settings.dedupe_store {
            store.ping().await.map_err(Error::DedupeStore)?;
        }
        // Outbox messages whose process died between its commit and their
        // dispatch: published at start, then every interval, until this
        // connection ends.
        let relay = self.settings.dedupe_store.as_ref().and_then(|store| {
            let interval = store.relay_interval()?;
            let (store, connection) = (Arc::clone(store), Arc::clone(connection));
            let (stop, timeout) = (stop.clone(), self.settings.confirm_timeout);
            Some(
                tokio::spawn(relay_outbox(store, connection, interval, timeout, stop))
                    .abort_handle(),
            )
        });
        let _relay = relay.map(AbortOnDrop);
        let env = WorkerEnv {
            connection: Arc::clone(connection),
            state: Arc::clone(&self.state),
            confirm_timeout: self.settings.confirm_timeout,
            shutdown: stop.clone(),
            paused: Some(pause_report(&self.health.0)),
            store_report: Some(store_report(&self.health.0)),
            dedupe_store: self.settings.dedupe_store.clone(),
            index_writer,
        };
        let mut running = JoinSet::new();
        for registration in &self.consumers {
            running.spawn(registration.start(env.clone()).await?);
            tracing::info!("consuming from {}", registration.spec().queue);
        }
        self.health.0.send_replace(Health::Ready);
        self.health.1.became_ready();
        *failures = 0;

        let ended = tokio::select! {
            _ = self.shutdown.wait() => None,
            ended = running.join_next() => ended,
        };
        stop.shutdown();
        if let Some(ended) = ended {
            // A consumer stopped by itself: its channel or the connection is gone.
            let error = match ended {
                Ok(Err(e)) => e,
                Ok(Ok(())) => Error::Cancelled {
                    queue: String::from("(unknown)"),
                },
                Err(join) => {
                    tracing::error!("a consumer task failed: {join}");
                    Error::Cancelled {
                        queue: String::from("(unknown)"),
                    }
                }
            };
            // The others finish their handlers in flight, briefly.
            let _ = tokio::time::timeout(Duration::from_secs(5), drain(&mut running)).await;
            running.abort_all();
            return Err(error);
        }

        self.health.0.send_replace(Health::Stopping);
        tracing::info!(
            "shutting down: finishing handlers in flight (grace {:?})",
            self.settings.shutdown_grace
        );
        match tokio::time::timeout(self.settings.shutdown_grace, drain(&mut running)).await {
            Ok(first_error) => {
                if let Some(e) = first_error {
                    tracing::warn!("a consumer ended with an error during shutdown: {e}");
                }
            }
            Err(_) => {
                tracing::warn!(
                    "grace period over: unfinished messages stay unacked and will be redelivered"
                );
                running.abort_all();
            }
        }
        Ok(())
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

/// Turns a consumer's breaker pausing it, and resuming, into the runtime's health.
fn pause_report(health: &tokio::sync::watch::Sender<Health>) -> PauseReport {
    let health = health.clone();
    Arc::new(move |paused: Option<&str>| {
        health.send_replace(match paused {
            Some(queue) => Health::Paused(queue.to_owned()),
            None => Health::Ready,
        });
    })
}

/// How an inbox's store failing and answering again shows in the health:
/// [`Health::StoreUnavailable`], then ready again.
fn store_report(health: &tokio::sync::watch::Sender<Health>) -> StoreReport {
    let health = health.clone();
    Arc::new(move |down: Option<&str>| match down {
        Some(why) => {
            health.send_replace(Health::StoreUnavailable(why.to_owned()));
        }
        None => {
            health.send_if_modified(|health| {
                let was_down = matches!(health, Health::StoreUnavailable(_));
                if was_down {
                    tracing::info!("the dedupe store answers again");
                    *health = Health::Ready;
                }
                was_down
            });
        }
    })
}

/// Waits for every consumer task; the first error, if any.
async fn drain(running: &mut JoinSet<Result<(), Error>>) -> Option<Error> {
    let mut first = None;
    while let Some(ended) = running.join_next().await {
        if let Ok(Err(e)) = ended {
            first.get_or_insert(e);
        }
    }
    first
}

impl RuntimeBuilder {
    /// The broker address (default: `AMQP_URL`, else the local broker).
    pub fn uri(mut self, uri: impl Into<String>) -> Self {
        self.uri = Some(uri.into());
        self
    }

    /// The nodes of a cluster: the runtime connects to the first that
    /// answers and, when the connection is lost, to the next, with the same
    /// capped backoff. `AMQP_URL` may hold the same list, comma-separated.
    pub fn uris<I, S>(self, uris: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.transport(AmqpTransport::with_nodes(uris))
    }

    /// Another way to reach a broker than an `amqp://` address, such as the
    /// in-memory broker of `rabbit_backoff::testing`. Takes precedence over
    /// [`uri`](Self::uri).
    pub fn transport(mut self, transport: impl Transport) -> Self {
        self.transport = Some(Arc::new(transport));
        self
    }

    /// Registers shared state, taken by handlers as `State<T>`. One value per type.
    pub fn state<T: Any + Send + Sync>(self, value: T) -> Self {
        self.state_arc(Arc::new(value))
    }

    /// Registers shared state that is already in an [`Arc`].
    pub fn state_arc<T: Any + Send + Sync>(mut self, value: Arc<T>) -> Self {
        self.state.insert(value);
        self
    }

    /// Registers a consumer with its compiled-in spec.
    pub fn consumer<C: Consumer>(self, consumer: C) -> Self {
        self.consumer_with(consumer, |_| {})
    }

    /// Registers a consumer and changes its spec first: the queue and every
    /// name, the delays, prefetch, concurrency, queue type, the retry route,
    /// the declare mode. Changes are validated by [`build`](Self::build).
    /// A concurrency that was not set explicitly follows a changed prefetch.
    ///
    /// ```no_run
    /// # use rabbit_backoff::{Consumer, Runtime};
    /// # fn demo(process_order: impl Consumer) -> Result<(), Box<dyn std::error::Error>> {
    /// let runtime = Runtime::builder()
    ///     .consumer_with(process_order, |spec| {
    ///         spec.queue = "orders-eu".into();
    ///         spec.delays = "1s,10s".parse().expect("valid delays");
    ///     })
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn consumer_with<C: Consumer>(
        mut self,
        consumer: C,
        configure: impl FnOnce(&mut ConsumerSpec),
    ) -> Self {
        let mut spec = consumer.spec();
        configure(&mut spec);
        self.consumers.push(Box::new(Registered {
            consumer: Arc::new(consumer),
            spec,
        }));
        self
    }

    /// How long to wait for the broker's confirm of a republish (default 30 s).
    /// Past it the original is requeued.
    pub fn confirm_timeout(mut self, timeout: Duration) -> Self {
        self.settings.confirm_timeout = timeout;
        self
    }

    /// How long handlers in flight may take to finish after a shutdown is
    /// asked for (default 30 s). Messages still unfinished then stay unacked,
    /// and the broker redelivers them.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.settings.shutdown_grace = grace;
        self
    }

    /// Whether SIGINT and SIGTERM trigger a graceful shutdown (default true).
    pub fn handle_signals(mut self, handle: bool) -> Self {
        self.settings.handle_signals = handle;
        self
    }

    /// How long to wait between reconnection attempts: from `initial`,
    /// doubling, up to `max`, with jitter (default 100 ms to 30 s).
    pub fn reconnect_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.settings.reconnect = ReconnectBackoff::new(initial, max);
        self
    }

    /// How often, between reconnection attempts, to probe the nodes with a
    /// bare TCP connect (default every 250 ms at most; `None`: never). A node
    /// that refused and then accepts is reconnected to at once instead of at
    /// the end of the backoff; a node that accepts all along is left to the
    /// backoff. See [`ReconnectProbe`].
    pub fn reconnect_probe(mut self, interval: Option<Duration>) -> Self {
        self.settings.reconnect_probe = interval.map(ReconnectProbe::new);
        self
    }

    /// Whether each connection watches that its node still reaches the
    /// cluster's majority, and how (`None`: it does not). By default it does,
    /// with [`MetadataWatch::default`] (a probe every 2 s, 3 s to answer,
    /// two unanswered in a row), when the broker address lists several
    /// nodes, and not for one node, where there is nowhere else to go.
    ///
    /// The watch declares and deletes a server-named exclusive queue on a
    /// channel of its own: a metadata write, which RabbitMQ 4.x (Khepri)
    /// answers only with its cluster's majority. When the probes go
    /// unanswered, the runtime leaves the node: it declares the connection
    /// lost and reconnects, trying every other node first. Without it, a
    /// consumer on a node cut off from the cluster consumes nothing until the
    /// cut heals, since the connection and its heartbeats stay healthy. On
    /// 3.x (Mnesia) such a declaration is answered on a minority node, so
    /// the watch never fires there. See `docs/cluster.md`, "The consumer's
    /// node cut off from the cluster".
    pub fn metadata_watch(mut self, watch: Option<MetadataWatch>) -> Self {
        self.settings.metadata_watch = WatchChoice::Set(watch);
        self
    }

    /// The inbox of the consumers with `dedupe = "…"`: a
    /// [`PostgresStore`](crate::dedupe), a `RedisStore` or a
    /// [`MemoryStore`](crate::dedupe::MemoryStore). Required when a
    /// consumer has `dedupe`; the runtime waits for it at start-up, as for
    /// the broker, and with a `PostgresStore` relays the outbox.
    ///
    /// ```no_run
    /// # use rabbit_backoff::{Consumer, Runtime};
    /// # async fn demo(charge: impl Consumer) -> Result<(), Box<dyn std::error::Error>> {
    /// use rabbit_backoff::dedupe::MemoryStore;
    ///
    /// Runtime::builder()
    ///     .dedupe_store(MemoryStore::new())
    ///     .consumer(charge)
    ///     .run()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn dedupe_store(mut self, store: impl DedupeStore) -> Self {
        self.settings.dedupe_store = Some(Arc::new(store));
        self
    }

    /// Checks every consumer's spec, that queues are distinct, that every
    /// `State<T>` a handler takes was registered, and that consumers with
    /// `dedupe` (or taking `Tx`) have a store that fits.
    pub fn build(self) -> Result<Runtime, Error> {
        if self.consumers.is_empty() {
            return Err(Error::NoConsumer);
        }
        let mut queues = HashSet::new();
        for registration in &self.consumers {
            let spec = registration.spec();
            spec.validate().map_err(|source| Error::InvalidSpec {
                queue: spec.queue.clone(),
                source,
            })?;
            if !queues.insert(spec.queue.as_str()) {
                return Err(Error::DuplicateQueue(spec.queue.clone()));
            }
            if spec.retry == RetryBackend::Scheduled && !HOLDING_CHANNELS_BUILT {
                return Err(Error::InvalidSpec {
                    queue: spec.queue.clone(),
                    source: rabbit_backoff_core::SpecError::ScheduledNeedsFeature,
                });
            }
            self.check_dedupe(spec, &registration.required_state())?;
            if let Some(missing) = registration
                .required_state()
                .into_iter()
                .filter(|r| Some(*r) != transaction_requirement())
                .find(|r| !self.state.contains(r))
            {
                return Err(Error::MissingState {
                    queue: spec.queue.clone(),
                    type_name: missing.type_name(),
                });
            }
        }
        let uses_dedupe = self.consumers.iter().any(|c| c.spec().dedupe.is_some());
        Ok(Runtime {
            index_writer: tokio::sync::OnceCell::new(),
            index_writer_task: std::sync::Mutex::new(None),
            transport: self.transport.unwrap_or_else(|| {
                Arc::new(AmqpTransport::new(
                    self.uri.unwrap_or_else(amqp_url_from_env),
                ))
            }),
            consumers: self.consumers,
            state: Arc::new(self.state),
            settings: Settings {
                // Only consumers with dedupe use it: no ping or relay otherwise.
                dedupe_store: self.settings.dedupe_store.filter(|_| uses_dedupe),
                ..self.settings
            },
            shutdown: ShutdownHandle::new(),
            health: HealthWatch::channel(),
        })
    }

    /// A consumer with `dedupe` needs a store; one taking `Tx` needs `dedupe`
    /// on a transactional store.
    fn check_dedupe(
        &self,
        spec: &ConsumerSpec,
        required: &[StateRequirement],
    ) -> Result<(), Error> {
        let queue = || spec.queue.clone();
        if spec.dedupe.is_some() && self.settings.dedupe_store.is_none() {
            return Err(Error::DedupeWithoutStore { queue: queue() });
        }
        if transaction_requirement().is_some_and(|tx| required.contains(&tx)) {
            let found = match (&spec.dedupe, &self.settings.dedupe_store) {
                (None, _) => String::from("the consumer has no dedupe"),
                (_, Some(store)) if !store.transactional() => {
                    format!("the store at {} has no transactions", store.describe())
                }
                _ => return Ok(()),
            };
            return Err(Error::TransactionWithoutStore {
                queue: queue(),
                found,
            });
        }
        Ok(())
    }

    /// Builds, starts running in the background, and returns once every
    /// consumer is consuming (or with the error that stopped start-up). Stop
    /// it with [`RunningRuntime::stop`]; dropping the handle leaves it running.
    pub async fn start(self) -> Result<RunningRuntime, Error> {
        self.build()?.start().await
    }

    /// Builds and runs: see [`Runtime::run`].
    pub async fn run(self) -> Result<(), Error> {
        self.build()?.run().await
    }
}

/// A consumer with its final spec, its type erased so that one runtime holds many.
trait Registration: Send + Sync {
    fn spec(&self) -> &ConsumerSpec;
    fn required_state(&self) -> Vec<StateRequirement>;
    fn start(
        &self,
        env: WorkerEnv,
    ) -> BoxFuture<'static, Result<BoxFuture<'static, Result<(), Error>>, Error>>;
}

struct Registered<C> {
    consumer: Arc<C>,
    spec: ConsumerSpec,
}

impl<C: Consumer> Registration for Registered<C> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    fn required_state(&self) -> Vec<StateRequirement> {
        self.consumer.required_state()
    }

    fn start(
        &self,
        env: WorkerEnv,
    ) -> BoxFuture<'static, Result<BoxFuture<'static, Result<(), Error>>, Error>> {
        let consumer = Arc::clone(&self.consumer);
        let spec = self.spec.clone();
        Box::pin(async move {
            let (worker, stream) = Worker::start(consumer, spec, env).await?;
            let run: BoxFuture<'static, Result<(), Error>> = Box::pin(worker.run(stream));
            Ok(run)
        })
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

/// Aborts a background task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
