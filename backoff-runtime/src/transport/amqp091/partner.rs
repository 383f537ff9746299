//! The partner of an AMQP 0-9-1 connection: an AMQP 1.0 connection to the
//! same node, through which the channels whose deliveries can be held
//! consume ([`Connection::open_holding_channel`]). RabbitMQ 4.3 holds a
//! delivery back until the time it names only when it is settled as AMQP
//! 1.0's `modified`; declaring and publishing stay on AMQP 0-9-1.
//!
//! The partner is opened when the first such channel is asked for, and
//! lives and dies with its connection: losing either loses both (a
//! consumer reading over AMQP 1.0 publishes its dead letters over AMQP
//! 0-9-1, and would otherwise go on taking messages whose dead letters it
//! cannot publish), and closing the connection closes it. Without the
//! feature `amqp1` there is none to open.

use std::sync::Arc;

use crate::transport::channel::Channel;
#[cfg(feature = "amqp1")]
use crate::transport::connection::Connection;
use crate::transport::connection_loss::LostSignal;
use crate::transport::transport_error::TransportError;

/// Whether this build opens partners, and with them the channels whose
/// deliveries can be held back: the feature `amqp1` builds the AMQP 1.0
/// client.
pub(crate) const HOLDING_CHANNELS_BUILT: bool = cfg!(feature = "amqp1");

/// The AMQP 1.0 connection paired with an AMQP 0-9-1 one, once opened.
#[derive(Default)]
pub(super) struct Partner {
    #[cfg(feature = "amqp1")]
    opened: tokio::sync::OnceCell<Opened>,
}

/// An opened partner, and the task that ties its loss to its
/// connection's; dropped, the task ends and the partner closes.
#[cfg(feature = "amqp1")]
struct Opened {
    connection: Arc<dyn Connection>,
    tie: tokio::task::AbortHandle,
}

#[cfg(feature = "amqp1")]
impl Drop for Opened {
    fn drop(&mut self) {
        self.tie.abort();
    }
}

#[cfg(feature = "amqp1")]
impl Partner {
    /// Begins a session on the partner, first opening it to the first of
    /// `nodes` that accepts (the connection's own node first), tied to the
    /// connection whose loss `lost` declares.
    pub(super) async fn open_channel(
        &self,
        nodes: Vec<String>,
        lost: &LostSignal,
    ) -> Result<Arc<dyn Channel>, TransportError> {
        let opened = self
            .opened
            .get_or_try_init(|| async {
                let connection = crate::transport::amqp1::connect(&nodes.join(",")).await?;
                let tied = tie(lost.clone(), Arc::clone(&connection));
                Ok::<_, TransportError>(Opened {
                    connection,
                    tie: tokio::spawn(tied).abort_handle(),
                })
            })
            .await?;
        opened.connection.open_channel().await
    }

    /// Declares the partner lost with `why`, so that its consumers' streams
    /// end at once, and closes it; nothing when it was never opened.
    pub(super) async fn leave(&self, why: &str) {
        if let Some(opened) = self.opened.get() {
            opened.connection.leave(why).await;
        }
    }

    /// Closes the partner, when opened.
    pub(super) async fn close(&self) {
        if let Some(opened) = self.opened.get() {
            opened.tie.abort();
            opened.connection.close().await;
        }
    }
}

/// Waits until either connection is lost: the partner's loss is declared
/// the connection's (whose `lost` is `connection`), and the connection's
/// loss leaves the partner, whose consumers' streams end at once.
#[cfg(feature = "amqp1")]
async fn tie(connection: LostSignal, partner: Arc<dyn Connection>) {
    let (own, partners) = (connection.watch(), partner.lost());
    tokio::select! {
        why = partners.wait() => {
            connection.lose(format!("its AMQP 1.0 partner is lost: {why}"));
        }
        why = own.wait() => {
            tracing::warn!(
                "closing the AMQP 1.0 connection to {} as well: the AMQP 0-9-1 connection it is \
                 paired with is lost ({why})",
                partner.node()
            );
            partner.leave(&why).await;
        }
    }
}

#[cfg(not(feature = "amqp1"))]
impl Partner {
    /// Refuses: without the feature `amqp1` there is no AMQP 1.0 client.
    pub(super) async fn open_channel(
        &self,
        nodes: Vec<String>,
        lost: &LostSignal,
    ) -> Result<Arc<dyn Channel>, TransportError> {
        let _ = (nodes, lost);
        Err(TransportError::Other(
            "retry = \"scheduled\" consumes over AMQP 1.0: turn on the feature `amqp1` of \
             rabbit-backoff"
                .to_owned(),
        ))
    }

    /// Nothing to leave.
    pub(super) async fn leave(&self, why: &str) {
        let _ = why;
    }

    /// Nothing to close.
    pub(super) async fn close(&self) {}
}
