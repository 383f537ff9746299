//! One generation of a [`Runtime`]: a connection's life. It connects,
//! checks that the node can serve every consumer, declares, starts the
//! outbox relay and every consumer, and consumes until shutdown or until a
//! consumer or the connection fails, then drains.

use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff_core::{RetryBackend, Topology};
use tokio::task::JoinSet;

use crate::broker::declare::establish_topology;
use crate::broker::held_retry_probe::check_broker_holds_retries;
use crate::broker::metadata_watch::watch_metadata;
use crate::consume::dedupe::StoreReport;
use crate::consume::shutdown::ShutdownHandle;
use crate::consume::worker::{PauseReport, WorkerEnv};
use crate::error::Error;
use crate::lifecycle::health::Health;
use crate::lifecycle::outbox_relay::relay_outbox;
use crate::lifecycle::runtime::Runtime;
use crate::transport::Connection;

impl Runtime {
    /// One connection's life: connect, declare, consume until shutdown (Ok)
    /// or until a consumer or the connection fails (Err).
    pub(super) async fn generation(&self, failures: &mut u32) -> Result<(), Error> {
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
        if let Some(watch) = self.settings.metadata_watch(&*self.transport) {
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

    /// On `connection`: prepares the broker, starts the relay and every
    /// consumer, and runs until shutdown (Ok, once drained) or until a
    /// consumer ends by itself (Err). `stop` ends what the generation
    /// started.
    async fn consume(
        &self,
        connection: &Arc<dyn Connection>,
        stop: &ShutdownHandle,
        failures: &mut u32,
    ) -> Result<(), Error> {
        self.prepare(connection).await?;
        let _relay = self.relay(connection, stop);
        let env = WorkerEnv {
            connection: Arc::clone(connection),
            state: Arc::clone(&self.state),
            confirm_timeout: self.settings.confirm_timeout,
            shutdown: stop.clone(),
            paused: Some(pause_report(&self.health.0)),
            store_report: Some(store_report(&self.health.0)),
            dedupe_store: self.settings.dedupe_store.clone(),
            index_writer: self.index_writer().await,
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
        match ended {
            Some(ended) => Err(ended_by_itself(ended, &mut running).await),
            None => {
                self.drain_on_shutdown(&mut running).await;
                Ok(())
            }
        }
    }

    /// Checks that the node can serve every consumer, before anything is
    /// declared (a refused start declares nothing, indexes included),
    /// starts the index writer, declares every topology, and pings the
    /// dedupe store.
    async fn prepare(&self, connection: &Arc<dyn Connection>) -> Result<(), Error> {
        for spec in self.specs() {
            if spec.retry != RetryBackend::Tiers {
                check_broker_holds_retries(&**connection, &spec.queue, spec.retry).await?;
            }
        }
        self.index_writer().await;
        for spec in self.specs() {
            establish_topology(&**connection, &Topology::of(spec), spec.declare).await?;
        }
        if let Some(store) = &self.settings.dedupe_store {
            store.ping().await.map_err(Error::DedupeStore)?;
        }
        Ok(())
    }

    /// The outbox relay of this generation, when the dedupe store has an
    /// outbox: outbox messages whose process died between its commit and
    /// their dispatch, published at start, then every interval, until `stop`
    /// (or until dropped).
    fn relay(
        &self,
        connection: &Arc<dyn Connection>,
        stop: &ShutdownHandle,
    ) -> Option<AbortOnDrop> {
        let store = self.settings.dedupe_store.as_ref()?;
        let interval = store.relay_interval()?;
        let (store, connection) = (Arc::clone(store), Arc::clone(connection));
        let (stop, timeout) = (stop.clone(), self.settings.confirm_timeout);
        let relay = tokio::spawn(relay_outbox(store, connection, interval, timeout, stop));
        Some(AbortOnDrop(relay.abort_handle()))
    }

    /// Lets the handlers in flight finish within the shutdown grace period;
    /// past it, their messages stay unacked.
    async fn drain_on_shutdown(&self, running: &mut JoinSet<Result<(), Error>>) {
        self.health.0.send_replace(Health::Stopping);
        tracing::info!(
            "shutting down: finishing handlers in flight (grace {:?})",
            self.settings.shutdown_grace
        );
        match tokio::time::timeout(self.settings.shutdown_grace, drain(running)).await {
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
    }
}

/// A consumer stopped by itself (its channel or the connection is gone):
/// the others finish their handlers in flight, briefly, and its error ends
/// the generation.
async fn ended_by_itself(
    ended: Result<Result<(), Error>, tokio::task::JoinError>,
    running: &mut JoinSet<Result<(), Error>>,
) -> Error {
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
    let _ = tokio::time::timeout(Duration::from_secs(5), drain(running)).await;
    running.abort_all();
    error
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

/// Aborts a background task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
