//! [`Amqp1Connection`]: one AMQP 1.0 connection to RabbitMQ 4, in a task
//! of its own that owns fe2o3-amqp's handle, begins sessions on request and
//! declares the connection lost when it ends.

use std::sync::Arc;
use std::time::Duration;

use fe2o3_amqp::connection::{ConnectionHandle, OpenError};
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::session::{Session, SessionHandle};
use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::address::Endpoint;
use super::channel::Amqp1Channel;
use crate::transport::channel::Channel;
use crate::transport::connection::Connection;
use crate::transport::connection_loss::{Lost, LostSignal};
use crate::transport::net::connector::{open_socket, parse_node};
use crate::transport::net::redact::redact;
use crate::transport::transport_error::TransportError;

/// The largest frame this side accepts; the broker may ask for smaller
/// ones (RabbitMQ's `frame_max`, 128 KiB by default).
pub(crate) const MAX_FRAME_SIZE: u32 = 131_072;

/// How long this side waits without a frame from the broker before it
/// takes the connection for dead (RabbitMQ sends one at least every half of
/// its own 60 s).
const IDLE_TIME_OUT_MS: u32 = 60_000;

/// How long opening a connection, beginning a session or closing may take.
const TIMEOUT: Duration = Duration::from_secs(15);

/// What the connection's task is asked to do.
enum Command {
    /// Begin a session.
    Begin(oneshot::Sender<Result<SessionHandle<()>, TransportError>>),
    /// Close the connection; `done` dropped once closed.
    Close(oneshot::Sender<()>),
}

/// One AMQP 1.0 connection.
pub(crate) struct Amqp1Connection {
    commands: mpsc::Sender<Command>,
    lost: LostSignal,
    node: String,
}

/// Opens an AMQP 1.0 connection to the first node of `uri` (a
/// comma-separated list of `amqp://user:pass@host:port/vhost` URIs, tried
/// in order) that accepts one.
pub async fn connect(uri: &str) -> Result<Arc<dyn Connection>, TransportError> {
    let mut last_error = None;
    for uri in uri.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        match open(uri).await {
            Ok(connection) => return Ok(Arc::new(connection)),
            Err(e) => {
                tracing::debug!("{}: no AMQP 1.0 connection: {e}", redact(uri));
                last_error = Some(e);
            }
        }
    }
    Err(last_error.unwrap_or_else(|| TransportError::Other("no broker address given".into())))
}

async fn open(uri: &str) -> Result<Amqp1Connection, TransportError> {
    let (parsed, tls) = parse_node(uri)?;
    let endpoint = Endpoint::of(&parsed);
    let node = endpoint.node();
    let hostname = endpoint.open_hostname();
    let builder = fe2o3_amqp::Connection::builder()
        .container_id(format!("rabbit-backoff-{}", uuid::Uuid::new_v4().simple()))
        .scheme("amqp")
        .hostname(hostname.as_deref())
        .sasl_profile(SaslProfile::Plain {
            username: endpoint.username.clone(),
            password: endpoint.password.clone(),
        })
        .max_frame_size(MAX_FRAME_SIZE)
        .idle_time_out(IDLE_TIME_OUT_MS);
    let opening = async {
        // The runtime's own socket, as for AMQP 0-9-1: TLS for amqps://,
        // and Nagle's algorithm off. fe2o3-amqp opening a URL itself leaves
        // it on: a small frame (a disposition, a flow) then waits for the
        // broker's acknowledgement of the one before, up to its 40 ms
        // delayed ACK, whenever the broker has nothing else to send
        // (docs/upstream.md, "No `TCP_NODELAY`").
        let socket = open_socket(&parsed, tls.as_ref()).await?;
        builder
            .open_with_stream(socket)
            .await
            .map_err(|e| open_error(&node, e))
    };
    let handle = match tokio::time::timeout(TIMEOUT, opening).await {
        Ok(Ok(handle)) => handle,
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(TransportError::Other(format!(
                "{node}: no AMQP 1.0 connection within {TIMEOUT:?}"
            )));
        }
    };
    let lost = LostSignal::new();
    let (commands, receiving) = mpsc::channel(16);
    tokio::spawn(run(handle, receiving, lost.clone(), node.clone()));
    Ok(Amqp1Connection {
        commands,
        lost,
        node,
    })
}

/// Why a connection could not be opened, in the transport's terms.
fn open_error(node: &str, error: OpenError) -> TransportError {
    match error {
        OpenError::ProtocolHeaderMismatch(header) => TransportError::Other(format!(
            "{node} does not speak AMQP 1.0: it answered with the protocol header {} (RabbitMQ serves AMQP 1.0 on its AMQP port from 4.0 on; the consume path needs 4.3)",
            protocol_header(&header)
        )),
        other => TransportError::Other(format!("{node}: opening an AMQP 1.0 connection: {other}")),
    }
}

/// A protocol header as AMQP writes it: `AMQP 0 0 9 1`.
fn protocol_header(header: &[u8]) -> String {
    match header.split_at_checked(4) {
        Some((b"AMQP", version)) => version
            .iter()
            .fold("AMQP".to_owned(), |text, byte| format!("{text} {byte}")),
        _ => format!("{header:?}"),
    }
}

/// What the connection's task saw first.
enum Event {
    Command(Option<Command>),
    Ended(Result<(), fe2o3_amqp::connection::Error>),
}

/// Serves `commands` until the connection is closed by this side (or the
/// [`Amqp1Connection`] dropped), or ends otherwise: then it is lost.
async fn run(
    mut handle: ConnectionHandle<()>,
    mut commands: mpsc::Receiver<Command>,
    lost: LostSignal,
    node: String,
) {
    loop {
        let event = tokio::select! {
            command = commands.recv() => Event::Command(command),
            ended = handle.on_close() => Event::Ended(ended),
        };
        match event {
            Event::Command(Some(Command::Begin(reply))) => {
                let begun = match tokio::time::timeout(TIMEOUT, Session::begin(&mut handle)).await {
                    Ok(Ok(session)) => Ok(session),
                    Ok(Err(e)) => Err(TransportError::Closed(format!(
                        "beginning an AMQP 1.0 session on {node}: {e}"
                    ))),
                    Err(_) => Err(TransportError::Closed(format!(
                        "{node} did not begin an AMQP 1.0 session within {TIMEOUT:?}"
                    ))),
                };
                let _ = reply.send(begun);
            }
            Event::Command(Some(Command::Close(done))) => {
                close(&mut handle, &node).await;
                drop(done);
                return;
            }
            Event::Command(None) => {
                close(&mut handle, &node).await;
                return;
            }
            Event::Ended(ended) => {
                let why = match ended {
                    Ok(()) => "the broker closed the AMQP 1.0 connection".to_owned(),
                    Err(e) => format!("the AMQP 1.0 connection ended: {e}"),
                };
                tracing::warn!("the connection to {node} is lost: {why}");
                lost.lose(why);
                return;
            }
        }
    }
}

/// Closes the connection, waiting at most [`TIMEOUT`] for the broker.
async fn close(handle: &mut ConnectionHandle<()>, node: &str) {
    match tokio::time::timeout(TIMEOUT, handle.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("closing the AMQP 1.0 connection to {node}: {e}"),
        Err(_) => tracing::debug!("{node} did not answer the AMQP 1.0 close"),
    }
}

impl Connection for Amqp1Connection {
    /// Begins a session: a channel that only consumes.
    fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
        let lost = self.lost.watch();
        Box::pin(async move {
            let session = lost
                .or_fail(async {
                    let (reply, begun) = oneshot::channel();
                    let closed =
                        || TransportError::Closed("the AMQP 1.0 connection is closed".into());
                    self.commands
                        .send(Command::Begin(reply))
                        .await
                        .map_err(|_| closed())?;
                    begun.await.map_err(|_| closed())?
                })
                .await?;
            let channel: Arc<dyn Channel> = Arc::new(Amqp1Channel::new(session, lost));
            Ok(channel)
        })
    }

    /// The largest frame this side accepts: fe2o3-amqp keeps the
    /// negotiated size (the smaller of this and the broker's) to itself.
    fn frame_max(&self) -> u32 {
        MAX_FRAME_SIZE
    }

    /// `host:port`.
    fn node(&self) -> String {
        self.node.clone()
    }

    fn lost(&self) -> Lost {
        self.lost.watch()
    }

    /// Declares the connection lost with `why` first, so that its links
    /// end their consumers' streams at once, then closes it (a node cut off
    /// may not answer the close).
    fn leave<'a>(&'a self, why: &'a str) -> BoxFuture<'a, ()> {
        self.lost.lose(why.to_owned());
        self.close()
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let (done, closed) = oneshot::channel();
            if self.commands.send(Command::Close(done)).await.is_ok() {
                let _ = closed.await;
            }
        })
    }
}
