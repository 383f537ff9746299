//! The runtime's own socket to a node: TCP with `TCP_NODELAY`, and TLS
//! above it for `amqps://` (feature `tls`), for both protocols: AMQP 0-9-1
//! hands it to lapin under the frame guard, AMQP 1.0 to fe2o3-amqp.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use lapin::uri::{AMQPScheme, AMQPUri};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::transport::transport_error::TransportError;

/// The socket under the frame guard: TCP, or TLS over TCP.
#[derive(Debug)]
pub(crate) enum Socket {
    /// `amqp://`.
    Plain(TcpStream),
    /// `amqps://`.
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// One node's URI, parsed without its TLS parameters, and for `amqps://`
/// the TLS settings they give; an `amqps://` URI is refused when the
/// feature `tls` is not built.
pub(crate) fn parse_node(uri: &str) -> Result<(AMQPUri, Option<TlsSettings>), TransportError> {
    #[cfg(feature = "tls")]
    let (uri, tls) = super::tls::split_uri(uri)?;
    let uri: AMQPUri = uri.parse().map_err(TransportError::Other)?;
    #[cfg(not(feature = "tls"))]
    let tls: Option<TlsSettings> = match uri.scheme {
        AMQPScheme::AMQP => None,
        AMQPScheme::AMQPS => {
            return Err(TransportError::Tls(
                crate::transport::tls_error::TlsError::NotBuilt,
            ));
        }
    };
    Ok((uri, tls))
}

/// The socket to `uri`'s node, as the AMQP 1.0 transport opens it: TCP
/// with `TCP_NODELAY`, and for `amqps://` TLS above it with `tls`, as for
/// AMQP 0-9-1.
#[cfg(feature = "amqp1")]
pub(crate) async fn open_socket(
    uri: &AMQPUri,
    tls: Option<&TlsSettings>,
) -> Result<Socket, TransportError> {
    open(uri, tls).await.map_err(|error| match error {
        OpenError::Io(e) => TransportError::Other(format!("{}: connecting: {e}", node_of(uri))),
        OpenError::Tls(e) => e,
    })
}

/// `host:port` of `uri`, for errors.
pub(crate) fn node_of(uri: &AMQPUri) -> String {
    format!("{}:{}", uri.authority.host, uri.authority.port)
}

/// The TLS settings of an `amqps://` address: none without the `tls`
/// feature, which refuses such an address before connecting.
#[cfg(feature = "tls")]
pub(crate) use super::tls::TlsSettings;
#[cfg(not(feature = "tls"))]
pub(crate) type TlsSettings = std::convert::Infallible;

/// Why a socket could not be opened: the TCP connection, or the TLS
/// handshake above it (kept whole, as it says what to do).
pub(crate) enum OpenError {
    /// Connecting TCP failed.
    Io(io::Error),
    /// The TLS handshake was refused.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    Tls(TransportError),
}

impl OpenError {
    /// The handshake's own error, when TLS refused.
    pub(crate) fn into_transport(self) -> Option<TransportError> {
        match self {
            OpenError::Io(_) => None,
            OpenError::Tls(error) => Some(error),
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Io(error) => error.fmt(f),
            OpenError::Tls(error) => error.fmt(f),
        }
    }
}

impl From<io::Error> for OpenError {
    fn from(error: io::Error) -> Self {
        OpenError::Io(error)
    }
}

/// Opens the socket to `uri`'s host: TCP, then TLS for `amqps://`.
pub(crate) async fn open(uri: &AMQPUri, tls: Option<&TlsSettings>) -> Result<Socket, OpenError> {
    let host = uri.authority.host.as_str();
    let connecting = TcpStream::connect((host, uri.authority.port));
    let tcp = match uri.query.connection_timeout {
        Some(ms) => tokio::time::timeout(Duration::from_millis(ms), connecting)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting timed out"))??,
        None => connecting.await?,
    };
    tcp.set_nodelay(true)?;
    match (&uri.scheme, tls) {
        (AMQPScheme::AMQP, _) => Ok(Socket::Plain(tcp)),
        (AMQPScheme::AMQPS, Some(settings)) => handshake(settings, host, tcp).await,
        (AMQPScheme::AMQPS, None) => Err(io::Error::other("amqps:// without TLS settings").into()),
    }
}

#[cfg(feature = "tls")]
async fn handshake(
    settings: &TlsSettings,
    host: &str,
    tcp: TcpStream,
) -> Result<Socket, OpenError> {
    super::tls::handshake(settings, host, tcp)
        .await
        .map(|stream| Socket::Tls(Box::new(stream)))
        .map_err(OpenError::Tls)
}

#[cfg(not(feature = "tls"))]
async fn handshake(settings: &TlsSettings, _: &str, _: TcpStream) -> Result<Socket, OpenError> {
    match *settings {}
}

/// Forwards to the TCP or the TLS stream.
macro_rules! forward {
    ($self:ident, $stream:ident => $call:expr) => {
        match $self.get_mut() {
            Socket::Plain($stream) => {
                let $stream = Pin::new($stream);
                $call
            }
            #[cfg(feature = "tls")]
            Socket::Tls($stream) => {
                let $stream = Pin::new(&mut **$stream);
                $call
            }
        }
    };
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        forward!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        forward!(self, s => s.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        forward!(self, s => s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        forward!(self, s => s.poll_shutdown(cx))
    }
}
