//! [`RuntimeBuilder`]: the broker, the consumers, their shared state and
//! run-time overrides, checked into a [`Runtime`].

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff_core::{
    ConsumerSpec, MetadataWatch, ReconnectBackoff, ReconnectProbe, RetryBackend,
};

use crate::consume::consumer::Consumer;
use crate::consume::extract::transaction_requirement;
use crate::consume::state::{StateMap, StateRequirement};
use crate::dedupe::DedupeStore;
use crate::error::Error;
use crate::lifecycle::registration::{Registered, Registration};
use crate::lifecycle::runtime::{RunningRuntime, Runtime};
use crate::lifecycle::settings::{Settings, WatchChoice};
use crate::transport::{AmqpTransport, HOLDING_CHANNELS_BUILT, Transport};

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

impl Runtime {
    /// A builder with the defaults: `AMQP_URL` or the local broker, a 30 s
    /// confirm timeout, a 30 s shutdown grace period, SIGINT/SIGTERM handled.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::new()
    }
}

impl RuntimeBuilder {
    /// A builder with the defaults (see [`Runtime::builder`]).
    fn new() -> Self {
        RuntimeBuilder {
            uri: None,
            transport: None,
            consumers: Vec::new(),
            state: StateMap::default(),
            settings: Settings::default(),
        }
    }

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
        let transport = self.transport.unwrap_or_else(|| {
            Arc::new(AmqpTransport::new(
                self.uri.unwrap_or_else(amqp_url_from_env),
            ))
        });
        let settings = Settings {
            // Only consumers with dedupe use it: no ping or relay otherwise.
            dedupe_store: self.settings.dedupe_store.filter(|_| uses_dedupe),
            ..self.settings
        };
        Ok(Runtime::new(
            transport,
            self.consumers,
            self.state,
            settings,
        ))
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
