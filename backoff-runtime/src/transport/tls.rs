//! Placeholder for `amqps://` (feature `tls`) until the TLS support lands:
//! the interface the connector calls, refusing every `amqps://` address.

use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::TransportError;

/// How to reach an `amqps://` node.
#[derive(Debug, Clone)]
pub(crate) struct TlsSettings {}

/// The URI lapin should parse (our TLS query parameters removed) and, for
/// `amqps://`, the TLS settings.
pub(crate) fn split_uri(uri: &str) -> Result<(String, Option<TlsSettings>), TransportError> {
    if uri.trim_start().starts_with("amqps://") {
        return Err(TransportError::Other(
            "amqps:// is not supported by this build yet".into(),
        ));
    }
    Ok((uri.to_owned(), None))
}

/// The TLS session over `tcp` with `host`.
pub(crate) async fn handshake(
    _settings: &TlsSettings,
    _host: &str,
    _tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, TransportError> {
    Err(TransportError::Other(
        "amqps:// is not supported by this build yet".into(),
    ))
}
