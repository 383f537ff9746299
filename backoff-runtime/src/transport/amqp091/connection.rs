//! [`AmqpConnection`]: one lapin connection to a node, which opens confirm
//! channels, says when it is lost, leaves its node, and opens the
//! channels whose deliveries can be held back through its
//! [partner](super::partner).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use lapin::options::ConfirmSelectOptions;
use rabbit_backoff_core::BrokerRelease;

use super::channel::{AmqpChannel, probe_metadata};
use super::close::{CLOSE_TIMEOUT, close_quietly};
use super::lapin_error::transport_error;
use super::node_connection::{NodeConnection, connect_node};
use super::nodes::{Nodes, lock};
use super::partner::Partner;
use crate::transport::channel::Channel;
use crate::transport::connection::Connection;
use crate::transport::connection_loss::{Lost, LostSignal};
use crate::transport::net::redact::redact;
use crate::transport::transport_error::TransportError;

/// Declares the connection lost as soon as lapin reports an error that
/// ended it (a reset or closed socket, a missed heartbeat, a forced close;
/// not a channel closed by the broker, which lapin reports the same way):
/// lapin fails what it has pending then, but an operation that races with
/// the error could otherwise wait for an answer that never comes.
fn watch_for_loss(
    connection: &lapin::Connection,
    node: &str,
) -> (LostSignal, tokio::task::JoinHandle<()>) {
    let signal = LostSignal::new();
    let mut events = connection.events_listener();
    let status = connection.status().clone();
    let (lost, node) = (signal.clone(), node.to_owned());
    let watcher = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            if let lapin::Event::Error(error) = event
                && (status.errored() || status.closed())
            {
                tracing::warn!("the connection to {node} is lost: {error}");
                lost.lose(error.to_string());
                return;
            }
        }
    });
    (signal, watcher)
}

/// A lapin connection.
pub struct AmqpConnection {
    inner: lapin::Connection,
    /// What the node named itself when the connection opened.
    release: Option<BrokerRelease>,
    /// The node it is connected to, without a password.
    node: String,
    /// Declared once lapin reports the connection failed.
    lost: LostSignal,
    /// Watches lapin's events for that.
    watcher: tokio::task::JoinHandle<()>,
    /// Its node's index in its transport's nodes.
    index: usize,
    /// Its transport's nodes.
    nodes: Arc<Nodes>,
    /// The node that last answered [`Connection::majority_elsewhere`].
    answered_elsewhere: Mutex<Option<usize>>,
    /// The AMQP 1.0 connection to the same node through which the channels
    /// whose deliveries can be held consume, opened when first asked for.
    partner: Partner,
}

impl Drop for AmqpConnection {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl AmqpConnection {
    /// The connection `connected` to node `index` of `nodes`.
    pub(super) fn new(connected: NodeConnection, index: usize, nodes: &Arc<Nodes>) -> Self {
        let NodeConnection { inner, release } = connected;
        let node = redact(&nodes.uris()[index]);
        let (lost, watcher) = watch_for_loss(&inner, &node);
        AmqpConnection {
            inner,
            release,
            node,
            lost,
            watcher,
            index,
            nodes: Arc::clone(nodes),
            answered_elsewhere: Mutex::new(None),
            partner: Partner::default(),
        }
    }

    /// The lapin connection, for what the framework does not wrap.
    pub fn lapin(&self) -> &lapin::Connection {
        &self.inner
    }
}

impl Connection for AmqpConnection {
    fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
        let lost = self.lost.watch();
        Box::pin(async move {
            let inner = lost
                .or_fail(async {
                    let inner = self.inner.create_channel().await.map_err(transport_error)?;
                    inner
                        .confirm_select(ConfirmSelectOptions::default())
                        .await
                        .map_err(transport_error)?;
                    Ok(inner)
                })
                .await?;
            let channel: Arc<dyn Channel> = Arc::new(AmqpChannel::new(inner, lost));
            Ok(channel)
        })
    }

    fn frame_max(&self) -> u32 {
        self.inner.configuration().frame_max()
    }

    fn node(&self) -> String {
        self.node.clone()
    }

    fn release(&self) -> Option<BrokerRelease> {
        self.release.clone()
    }

    fn lost(&self) -> Lost {
        self.lost.watch()
    }

    /// Asks every other node at once, each on a connection of its own; the
    /// first in the list that answered.
    fn majority_elsewhere(&self, timeout: Duration) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move {
            let uris = self.nodes.uris();
            let asks = uris
                .iter()
                .enumerate()
                .filter(|(index, _)| *index != self.index)
                .map(|(index, uri)| async move {
                    let answered = tokio::time::timeout(timeout, async {
                        let connection = connect_node(uri).await.ok()?.inner;
                        let channel = connection.create_channel().await.ok()?;
                        probe_metadata(&channel).await.ok()?;
                        Some(connection)
                    })
                    .await;
                    // A node that did not answer in time: its connection,
                    // dropped, closes.
                    let connection = answered.ok().flatten()?;
                    let _ = connection.close(200, "probed".into()).await;
                    Some(index)
                });
            let answered = futures_util::future::join_all(asks)
                .await
                .into_iter()
                .flatten()
                .next();
            *lock(&self.answered_elsewhere) = answered;
            answered.map(|index| redact(&uris[index]))
        })
    }

    /// Marks the node as left in its transport, whose next connect starts
    /// with the node that answered elsewhere (or the one after it),
    /// declares the connection lost, leaves its partner, then closes it,
    /// waiting at most 5 s for the broker's answer.
    fn leave<'a>(&'a self, why: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let next = lock(&self.answered_elsewhere)
                .take()
                .unwrap_or((self.index + 1) % self.nodes.uris().len().max(1));
            self.nodes.leave(self.index, next);
            self.lost.lose(why);
            self.partner.leave(why).await;
            let closing = self
                .inner
                .close(200, "leaving this node for another".into());
            match tokio::time::timeout(CLOSE_TIMEOUT, closing).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!("closing the connection left: {e}"),
                Err(_) => tracing::debug!(
                    "the node left did not confirm the connection's close in {CLOSE_TIMEOUT:?}"
                ),
            }
        })
    }

    /// Opens a session on its partner, an AMQP 1.0 connection to the same
    /// node (the others after it), opened the first time: RabbitMQ 4.3
    /// holds back a delivery settled as AMQP 1.0's `modified`. The
    /// partner's loss is this connection's; the feature `amqp1` builds it.
    fn open_holding_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
        let mut nodes = self.nodes.uris().to_vec();
        nodes.rotate_left(self.index);
        Box::pin(async move {
            let opening = self.partner.open_channel(nodes, &self.lost);
            self.lost.watch().or_fail(opening).await
        })
    }

    /// Closes its partner, when opened, then the connection.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.partner.close().await;
            let closing = self.inner.close(200, "closing".into());
            close_quietly(&self.lost.watch(), "the connection", closing).await;
        })
    }
}
