//! [`Settings`]: what a [`RuntimeBuilder`](super::builder::RuntimeBuilder)
//! sets and its [`Runtime`](super::runtime::Runtime) runs with, beside the
//! broker and the consumers.

use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff_core::{ClusterEvidence, MetadataWatch, ReconnectBackoff, ReconnectProbe};

use crate::dedupe::DedupeStore;
use crate::transport::Transport;

/// What a [`RuntimeBuilder`] sets and its [`Runtime`] runs with, beside
/// the broker and the consumers.
pub(super) struct Settings {
    /// How long a copy's confirmation is awaited.
    pub(super) confirm_timeout: Duration,
    /// How long a shutdown waits for the handlers in flight.
    pub(super) shutdown_grace: Duration,
    /// Whether SIGINT and SIGTERM stop the runtime.
    pub(super) handle_signals: bool,
    /// The pauses between reconnection attempts.
    pub(super) reconnect: ReconnectBackoff,
    /// How often a down broker is probed between reconnection attempts.
    pub(super) reconnect_probe: Option<ReconnectProbe>,
    /// The inbox of the consumers with `dedupe` (once built: when one of
    /// them has it).
    pub(super) dedupe_store: Option<Arc<dyn DedupeStore>>,
    /// Whether each connection watches that its node reaches the cluster's
    /// majority.
    pub(super) metadata_watch: WatchChoice,
}

/// Whether the runtime runs the metadata watch.
#[derive(Debug, Clone, Copy)]
pub(super) enum WatchChoice {
    /// With the default settings when the broker address lists several
    /// nodes (there is another to go to), else not.
    Auto,
    /// As set by [`RuntimeBuilder::metadata_watch`].
    Set(Option<MetadataWatch>),
}

impl Default for Settings {
    /// A 30 s confirm timeout, a 30 s shutdown grace period,
    /// SIGINT/SIGTERM handled, the default reconnection backoff and probe,
    /// no dedupe store, the metadata watch when there are several nodes.
    fn default() -> Self {
        Settings {
            confirm_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            handle_signals: true,
            reconnect: ReconnectBackoff::default(),
            reconnect_probe: Some(ReconnectProbe::default()),
            dedupe_store: None,
            metadata_watch: WatchChoice::Auto,
        }
    }
}

impl Settings {
    /// The metadata watch each connection to `transport` runs, if any.
    pub(super) fn metadata_watch(&self, transport: &dyn Transport) -> Option<MetadataWatch> {
        match self.metadata_watch {
            WatchChoice::Set(watch) => watch,
            // On when the address list names several nodes, as the
            // classic-on-cluster warning counts them.
            WatchChoice::Auto => ClusterEvidence::of_addresses(&transport.probe_addresses())
                .map(|_| MetadataWatch::default()),
        }
    }
}
