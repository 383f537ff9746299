use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use backoff_core::{ConsumerSpec, Topology};
use futures_util::future::BoxFuture;
use lapin::{Connection, ConnectionProperties};

use crate::error::redact;
use crate::state::StateMap;
use crate::worker::{Worker, WorkerEnv};
use crate::{
    Consumer, Error, Health, HealthWatch, ShutdownHandle, StateRequirement, declare_topology,
};

/// Builds a [`Runtime`]: the broker address, the consumers, their shared state
/// and run-time overrides.
///
/// ```no_run
/// # use backoff_runtime::{Consumer, Runtime};
/// # async fn demo(process_order: impl Consumer) -> Result<(), backoff_runtime::Error> {
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
    consumers: Vec<Box<dyn Registration>>,
    state: StateMap,
    confirm_timeout: Duration,
    shutdown_grace: Duration,
    handle_signals: bool,
}

/// Runs consumers until shutdown: declares every topology, then consumes.
///
/// Made by [`Runtime::builder`].
pub struct Runtime {
    uri: String,
    consumers: Vec<Box<dyn Registration>>,
    state: Arc<StateMap>,
    confirm_timeout: Duration,
    shutdown_grace: Duration,
    handle_signals: bool,
    shutdown: ShutdownHandle,
    health: (tokio::sync::watch::Sender<Health>, HealthWatch),
}

impl Runtime {
    /// A builder with the defaults: `AMQP_URL` or the local broker, a 30 s
    /// confirm timeout, a 30 s shutdown grace period, SIGINT/SIGTERM handled.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder {
            uri: None,
            consumers: Vec::new(),
            state: StateMap::default(),
            confirm_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            handle_signals: true,
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
    /// shutdown is asked for (by a [`ShutdownHandle`], SIGINT or SIGTERM) or a
    /// consumer fails. Returns once every channel and the connection are closed.
    pub async fn run(self) -> Result<(), Error> {
        let health = self.health.0.clone();
        let result = self.run_inner().await;
        health.send_replace(match &result {
            Ok(()) => Health::Stopped,
            Err(e) => Health::Failed(e.to_string()),
        });
        result
    }

    async fn run_inner(self) -> Result<(), Error> {
        let connection = connect(&self.uri).await?;
        for registration in &self.consumers {
            declare_topology(&connection, &Topology::of(registration.spec())).await?;
        }
        let env = WorkerEnv {
            connection: Arc::new(connection),
            state: self.state,
            confirm_timeout: self.confirm_timeout,
            shutdown: self.shutdown.clone(),
        };
        let mut running = Vec::with_capacity(self.consumers.len());
        for registration in self.consumers {
            let queue = registration.spec().queue.clone();
            match registration.start(env.clone()).await {
                Ok(future) => {
                    // A consumer that fails stops the runtime, so that `run` returns its error.
                    let shutdown = self.shutdown.clone();
                    running.push(tokio::spawn(async move {
                        let result = future.await;
                        if let Err(e) = &result {
                            tracing::error!("{e}");
                            shutdown.shutdown();
                        }
                        result
                    }))
                }
                Err(e) => {
                    self.shutdown.shutdown();
                    close(&env.connection).await;
                    return Err(e);
                }
            }
            tracing::info!("consuming from {queue}");
        }
        let signals = self
            .handle_signals
            .then(|| tokio::spawn(shutdown_on_signal(self.shutdown.clone())));
        self.health.0.send_replace(Health::Ready);

        self.shutdown.wait().await;
        self.health.0.send_replace(Health::Stopping);
        tracing::info!(
            "shutting down: finishing handlers in flight (grace {:?})",
            self.shutdown_grace
        );
        let mut first_error = None;
        let deadline = tokio::time::Instant::now() + self.shutdown_grace;
        for mut handle in running {
            match tokio::time::timeout_at(deadline, &mut handle).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => {
                    first_error.get_or_insert(e);
                }
                Ok(Err(join_error)) => tracing::error!("a consumer task failed: {join_error}"),
                Err(_) => {
                    tracing::warn!(
                        "grace period over: unfinished messages stay unacked and will be redelivered"
                    );
                    handle.abort();
                }
            }
        }
        if let Some(signals) = signals {
            signals.abort();
        }
        close(&env.connection).await;
        tracing::info!("stopped");
        first_error.map_or(Ok(()), Err)
    }
}

impl RuntimeBuilder {
    /// The broker address (default: `AMQP_URL`, else the local broker).
    pub fn uri(mut self, uri: impl Into<String>) -> Self {
        self.uri = Some(uri.into());
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
    /// name, the delays, prefetch, concurrency, queue type. Changes are
    /// validated by [`build`](Self::build).
    ///
    /// ```no_run
    /// # use backoff_runtime::{Consumer, Runtime};
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
        self.confirm_timeout = timeout;
        self
    }

    /// How long handlers in flight may take to finish after a shutdown is
    /// asked for (default 30 s). Messages still unfinished then stay unacked,
    /// and the broker redelivers them.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Whether SIGINT and SIGTERM trigger a graceful shutdown (default true).
    pub fn handle_signals(mut self, handle: bool) -> Self {
        self.handle_signals = handle;
        self
    }

    /// Checks every consumer's spec, that queues are distinct and that every
    /// `State<T>` a handler takes was registered.
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
            if let Some(missing) = registration
                .required_state()
                .into_iter()
                .find(|r| !self.state.contains(r))
            {
                return Err(Error::MissingState {
                    queue: spec.queue.clone(),
                    type_name: missing.type_name(),
                });
            }
        }
        Ok(Runtime {
            uri: self.uri.unwrap_or_else(crate::amqp_url_from_env),
            consumers: self.consumers,
            state: Arc::new(self.state),
            confirm_timeout: self.confirm_timeout,
            shutdown_grace: self.shutdown_grace,
            handle_signals: self.handle_signals,
            shutdown: ShutdownHandle::new(),
            health: HealthWatch::channel(),
        })
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
        self: Box<Self>,
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
        self: Box<Self>,
        env: WorkerEnv,
    ) -> BoxFuture<'static, Result<BoxFuture<'static, Result<(), Error>>, Error>> {
        Box::pin(async move {
            let (worker, stream) = Worker::start(self.consumer, self.spec, env).await?;
            let run: BoxFuture<'static, Result<(), Error>> = Box::pin(worker.run(stream));
            Ok(run)
        })
    }
}

pub(crate) async fn connect(uri: &str) -> Result<Connection, Error> {
    let properties = ConnectionProperties::default().with_connection_name("rabbit-backoff".into());
    Connection::connect(uri, properties)
        .await
        .map_err(|source| Error::Connect {
            uri: redact(uri),
            source,
        })
}

async fn close(connection: &Connection) {
    if let Err(e) = connection.close(200, "shutdown".into()).await {
        tracing::debug!("closing the connection: {e}");
    }
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
