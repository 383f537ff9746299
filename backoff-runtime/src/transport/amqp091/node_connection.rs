//! How the runtime opens a lapin connection to one node: on its own socket
//! (TCP, and TLS for `amqps://`), with the [frame guard](super::frame_guard)
//! between it and lapin.
//!
//! lapin's `Connection::connector` takes the stream from the caller, typed
//! as its async runtime's TCP stream; so the runtime hands lapin tokio for
//! everything (tasks, timers) through [`GuardedKit`], whose only difference
//! is that type: [`GuardedStream`] over a [`Socket`] whose greeting is read
//! ([`Greeted`]).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_rs::traits::Reactor;
use async_rs::util::RuntimeParts;
use async_rs::{Runtime, Tokio};
use futures_util::Stream;
use lapin::tcp::AsyncTcpStream;
use lapin::uri::AMQPUri;
use lapin::{ConnectionProperties, Error as LapinError};
use rabbit_backoff_core::BrokerRelease;

use super::frame_guard::{GuardedStream, MAX_FRAME_SIZE};
use super::lapin_error::transport_error;
use super::server_greeting::{Greeted, Greeting};
use crate::transport::net::connector::{Socket, TlsSettings, node_of, open, parse_node};
use crate::transport::transport_error::TransportError;

/// What lapin runs on: tokio's executor, and a reactor whose TCP stream is
/// the guarded socket.
type GuardedKit = RuntimeParts<Tokio, GuardedReactor>;

/// Tokio's reactor, but for the type of stream lapin is handed.
#[derive(Debug, Clone)]
pub(crate) struct GuardedReactor(Tokio);

impl Reactor for GuardedReactor {
    type TcpStream = GuardedStream<Greeted<Socket>>;
    type Sleep = <Tokio as Reactor>::Sleep;

    fn register<H: Read + Write + Send + 'static>(
        &self,
        _socket: H,
    ) -> io::Result<impl futures_io::AsyncRead + futures_io::AsyncWrite + Send + Unpin + 'static>
    {
        // lapin never registers a socket of its own: it is handed one.
        Err::<GuardedStream<Greeted<Socket>>, _>(io::Error::other(
            "the runtime opens its sockets itself",
        ))
    }

    fn sleep(&self, dur: Duration) -> Self::Sleep {
        self.0.sleep(dur)
    }

    fn interval(&self, dur: Duration) -> impl Stream<Item = Instant> + Send + 'static {
        self.0.interval(dur)
    }

    fn tcp_connect_addr(
        &self,
        _addr: SocketAddr,
    ) -> impl Future<Output = io::Result<Self::TcpStream>> + Send + 'static {
        // lapin connects through the closure given to `connector`.
        std::future::ready(Err(io::Error::other(
            "the runtime opens its sockets itself",
        )))
    }
}

/// How long connecting to a node may take, TCP, TLS and the AMQP handshake
/// together, unless the URI's `connection_timeout` says otherwise.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to one node, and the release the node named in its
/// greeting.
#[derive(Debug)]
pub(crate) struct NodeConnection {
    /// The lapin connection.
    pub(crate) inner: lapin::Connection,
    /// The node's product and version, from `connection.start`.
    pub(crate) release: Option<BrokerRelease>,
}

/// Connects to one node, with a `frame_max` of at most [`MAX_FRAME_SIZE`],
/// within [`CONNECT_TIMEOUT`] or the URI's `connection_timeout`.
pub(crate) async fn connect_node(uri: &str) -> Result<NodeConnection, TransportError> {
    let (mut uri, tls) = parse_node(uri)?;
    let frame_max = uri.query.frame_max.unwrap_or(MAX_FRAME_SIZE);
    uri.query.frame_max = Some(frame_max.min(MAX_FRAME_SIZE));
    let negotiated = Arc::new(AtomicU32::new(frame_max.min(MAX_FRAME_SIZE)));
    let properties = ConnectionProperties::default().with_connection_name("rabbit-backoff".into());
    let runtime = Runtime::new(RuntimeParts::new(
        Tokio::current(),
        GuardedReactor(Tokio::current()),
    ));
    let guard_frame_max = negotiated.clone();
    // lapin keeps only the text of what the closure returns: a refused TLS
    // handshake is kept here whole, so the caller reads what to do.
    let refused: Arc<Mutex<Option<TransportError>>> = Arc::default();
    let why = refused.clone();
    let host = uri.authority.host.clone();
    let tls = tls.map(Arc::new);
    let tls_settings = tls.clone();
    let greeting = Greeting::default();
    let greeted = Arc::clone(&greeting);
    let connect = async move |uri: AMQPUri, _: Runtime<GuardedKit>| {
        let socket = open(&uri, tls.as_deref()).await.map_err(|error| {
            let text = error.to_string();
            if let Some(error) = error.into_transport() {
                *why.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
            }
            LapinError::from(io::Error::other(text))
        })?;
        let socket = Greeted::new(socket, Arc::clone(&greeted));
        let stream = GuardedStream::new(socket, guard_frame_max.clone());
        Ok::<_, LapinError>(AsyncTcpStream::Plain(stream))
    };
    // The whole of it bounded: a broker that accepts the TCP connection but
    // never answers the handshake (still booting, behind a stuck proxy)
    // would otherwise hold the caller for ever: lapin's async connect leaves
    // `connection_timeout` out (docs/upstream.md, "The handshake outside
    // `connection_timeout`").
    let within = uri
        .query
        .connection_timeout
        .map_or(CONNECT_TIMEOUT, Duration::from_millis);
    let node = node_of(&uri);
    let connecting = lapin::Connection::connector(uri, runtime, connect, properties);
    let Ok(connected) = tokio::time::timeout(within, connecting).await else {
        return Err(TransportError::Other(format!(
            "{node}: no AMQP connection within {within:?} (TCP, TLS and the AMQP handshake; \
             the URI's connection_timeout, in milliseconds, sets this bound)"
        )));
    };
    let connection = match connected {
        Ok(connection) => connection,
        Err(error) => {
            let kept = refused.lock().unwrap_or_else(|e| e.into_inner()).take();
            return Err(kept
                .or_else(|| explain(tls_settings.as_deref(), &host, &error))
                .unwrap_or_else(|| transport_error(error)));
        }
    };
    negotiated.store(connection.configuration().frame_max(), Ordering::Relaxed);
    let release = greeting.get().cloned().flatten();
    Ok(NodeConnection {
        inner: connection,
        release,
    })
}

/// What an I/O error after the TLS handshake means, when TLS explains it
/// (a server's alert, or a client certificate refused by a closed socket).
#[cfg(feature = "tls")]
fn explain(tls: Option<&TlsSettings>, host: &str, error: &LapinError) -> Option<TransportError> {
    let lapin::ErrorKind::IOError(io) = error.kind() else {
        return None;
    };
    tls?.explain_io_error(host, io)
}

#[cfg(not(feature = "tls"))]
fn explain(_: Option<&TlsSettings>, _: &str, _: &LapinError) -> Option<TransportError> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that accepts and never answers, as a broker still booting
    /// or a stuck proxy does: connecting fails within `connection_timeout`,
    /// saying so, instead of waiting for ever.
    #[tokio::test]
    async fn a_node_that_never_answers_the_handshake_is_given_up_on() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a local listener");
        let port = listener.local_addr().expect("its address").port();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let started = Instant::now();
        let uri = format!("amqp://guest:guest@127.0.0.1:{port}/%2f?connection_timeout=300");
        let error = tokio::time::timeout(Duration::from_secs(10), connect_node(&uri))
            .await
            .expect("connecting gives up on its own")
            .expect_err("nothing answers the handshake");
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(5), "gave up after {waited:?}");
        let text = error.to_string();
        assert!(text.contains("no AMQP connection within 300ms"), "{text}");
        silent.abort();
    }
}
