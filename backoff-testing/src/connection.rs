//! Connections: the [`Connection`] implementation of the in-memory broker,
//! and the registry through which a test closes them (or their channels) as
//! a broker would.
//!
//! A connection holds its open channels: closing it closes them, and their
//! unsettled deliveries return to their queues.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rabbit_backoff_core::BrokerRelease;
use rabbit_backoff_runtime::transport::{Channel, Connection, Lost, LostSignal, TransportError};

use crate::broker_shared::BrokerShared;
use crate::channel::{ChannelShared, MemoryChannel};
use crate::channel_kind::ChannelKind;
use crate::lock::lock;

/// The frame size RabbitMQ 3.10 negotiates by default.
const FRAME_MAX: u32 = 131_072;

fn connection_closed() -> TransportError {
    TransportError::Closed("the connection is closed".into())
}

/// One connection's state, shared with the registry (for forced closes).
pub(crate) struct ConnectionShared {
    state: Mutex<ConnectionState>,
    /// Declared when the connection closes, by the client or the broker.
    lost: LostSignal,
}

struct ConnectionState {
    closed: Option<TransportError>,
    /// Its channels by id; closed ones are pruned as new ones open.
    channels: HashMap<u64, Arc<ChannelShared>>,
}

impl ConnectionShared {
    fn is_closed(&self) -> bool {
        lock(&self.state).closed.is_some()
    }

    /// Closes the connection and every channel on it with `error`.
    pub(crate) fn close(&self, error: TransportError, forced: bool) {
        let channels: Vec<Arc<ChannelShared>> = {
            let mut st = lock(&self.state);
            if st.closed.is_some() {
                return;
            }
            st.closed = Some(error.clone());
            st.channels.drain().map(|(_, c)| c).collect()
        };
        self.lost.lose(match &error {
            TransportError::Closed(why) => why.clone(),
            other => other.to_string(),
        });
        for channel in sorted(channels) {
            channel.close(error.clone(), forced);
        }
    }

    /// Closes every open channel with `error`; the connection stays open.
    pub(crate) fn close_channels(&self, error: TransportError) {
        let channels: Vec<Arc<ChannelShared>> =
            lock(&self.state).channels.drain().map(|(_, c)| c).collect();
        for channel in sorted(channels) {
            channel.close(error.clone(), true);
        }
    }
}

fn sorted(mut channels: Vec<Arc<ChannelShared>>) -> Vec<Arc<ChannelShared>> {
    channels.sort_by_key(|c| c.id());
    channels
}

/// The connections of one broker that are not closed yet, for the faults
/// that close them.
#[derive(Default)]
pub(crate) struct Connections(Mutex<Vec<Arc<ConnectionShared>>>);

impl Connections {
    fn register(&self, connection: &Arc<ConnectionShared>) {
        let mut connections = lock(&self.0);
        connections.retain(|c| !c.is_closed());
        connections.push(Arc::clone(connection));
    }

    /// The connections not closed yet.
    pub(crate) fn open(&self) -> Vec<Arc<ConnectionShared>> {
        let mut connections = lock(&self.0);
        connections.retain(|c| !c.is_closed());
        connections.clone()
    }
}

/// A connection to the in-memory broker.
pub(crate) struct MemoryConnection {
    broker: Arc<BrokerShared>,
    shared: Arc<ConnectionShared>,
}

impl MemoryConnection {
    /// Opens a connection to `broker`, registered in `connections`.
    pub(crate) fn open(broker: &Arc<BrokerShared>, connections: &Connections) -> Self {
        let shared = Arc::new(ConnectionShared {
            state: Mutex::new(ConnectionState {
                closed: None,
                channels: HashMap::new(),
            }),
            lost: LostSignal::new(),
        });
        connections.register(&shared);
        MemoryConnection {
            broker: Arc::clone(broker),
            shared,
        }
    }

    /// Opens a channel of `kind`, registered in the connection.
    async fn open_kind(&self, kind: ChannelKind) -> Result<Arc<dyn Channel>, TransportError> {
        let channel = Arc::new(ChannelShared::new(self.broker.next_id(), kind));
        {
            let mut st = lock(&self.shared.state);
            if let Some(error) = &st.closed {
                return Err(error.clone());
            }
            st.channels.retain(|_, c| !c.is_closed());
            st.channels.insert(channel.id(), Arc::clone(&channel));
        }
        Ok(Arc::new(MemoryChannel::new(Arc::clone(&self.broker), channel)) as Arc<dyn Channel>)
    }
}

impl Connection for MemoryConnection {
    fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
        Box::pin(self.open_kind(ChannelKind::Confirm))
    }

    /// A channel of the same connection whose deliveries can also be
    /// settled as `modified` ([`Acker::modify`]), as
    /// `retry = "scheduled"` consumes: held back until the time it names by
    /// a quorum queue of a broker emulating 4.3.
    ///
    /// [`Acker::modify`]: rabbit_backoff_runtime::transport::Acker::modify
    fn open_holding_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
        Box::pin(self.open_kind(ChannelKind::Holding))
    }

    fn frame_max(&self) -> u32 {
        FRAME_MAX
    }

    fn lost(&self) -> Lost {
        self.shared.lost.watch()
    }

    /// RabbitMQ at the version of the release it emulates.
    fn release(&self) -> Option<BrokerRelease> {
        Some(self.broker.release.named())
    }

    /// While the broker is cut off from its majority
    /// ([`TestBroker::lose_majority`](crate::TestBroker::lose_majority)),
    /// the rest of the cluster answers: `(in memory, the majority)`.
    fn majority_elsewhere(&self, _: Duration) -> BoxFuture<'_, Option<String>> {
        let cut = self
            .broker
            .majority_lost
            .load(std::sync::atomic::Ordering::Relaxed);
        Box::pin(std::future::ready(
            cut.then(|| String::from("(in memory, the majority)")),
        ))
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.shared.close(connection_closed(), false);
        })
    }
}
