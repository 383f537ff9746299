//! Where an AMQP 1.0 connection goes: the node, the credentials and the
//! virtual host of an `amqp://` URI (the one the AMQP 0-9-1 side uses), and
//! the `/queues/<name>` address of a queue.

use lapin::uri::{AMQPScheme, AMQPUri};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::transport::TransportError;
use crate::transport::redact::redact;

/// What RFC 3986 leaves unencoded in a path segment of RabbitMQ 4's
/// `/queues/<name>` address: letters, digits and `-._~`.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// One node of an `amqp://` URI, as an AMQP 1.0 connection opens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// The host, as the URI names it (an IPv6 address without brackets).
    pub(crate) host: String,
    /// The port.
    pub(crate) port: u16,
    /// SASL PLAIN's user name (percent-decoded).
    pub(crate) username: String,
    /// SASL PLAIN's password (percent-decoded).
    pub(crate) password: String,
    /// The virtual host (percent-decoded); empty: the broker's default.
    pub(crate) vhost: String,
}

impl Endpoint {
    /// The node of `uri`: refuses `amqps://` (not supported over AMQP 1.0
    /// yet) and what does not parse, without the password in the error.
    pub(crate) fn parse(uri: &str) -> Result<Endpoint, TransportError> {
        let parsed: AMQPUri = uri
            .parse()
            .map_err(|e| TransportError::Other(format!("{}: not an AMQP URI: {e}", redact(uri))))?;
        if parsed.scheme == AMQPScheme::AMQPS {
            return Err(TransportError::Other(format!(
                "{}: amqps:// is not supported by the AMQP 1.0 transport yet; use amqp://",
                redact(uri)
            )));
        }
        Ok(Endpoint {
            host: parsed.authority.host,
            port: parsed.authority.port,
            username: parsed.authority.userinfo.username,
            password: parsed.authority.userinfo.password,
            vhost: parsed.vhost,
        })
    }

    /// `host:port`, for logs and [`Connection::node`](crate::transport::Connection::node).
    pub(crate) fn node(&self) -> String {
        format!("{}:{}", self.host_for_url(), self.port)
    }

    /// The open frame's hostname, which RabbitMQ 4 reads the virtual host
    /// from: `vhost:<name>`; `None` for the broker's default one.
    pub(crate) fn open_hostname(&self) -> Option<String> {
        (!self.vhost.is_empty()).then(|| format!("vhost:{}", self.vhost))
    }

    fn host_for_url(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }
}

/// RabbitMQ 4's address of the queue `queue`: `/queues/` and the name,
/// percent-encoded as one path segment.
pub(crate) fn queue_address(queue: &str) -> String {
    format!("/queues/{}", utf8_percent_encode(queue, SEGMENT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_gives_the_node_the_credentials_and_the_vhost() {
        let endpoint =
            Endpoint::parse("amqp://us%40er:p%3Ass@rabbit.local:5643/orders%2Feu").expect("parses");
        assert_eq!(endpoint.username, "us@er");
        assert_eq!(endpoint.password, "p:ss");
        assert_eq!(endpoint.vhost, "orders/eu");
        assert_eq!(endpoint.node(), "rabbit.local:5643");
        assert_eq!(
            (endpoint.host.as_str(), endpoint.port),
            ("rabbit.local", 5643)
        );
        assert_eq!(endpoint.open_hostname().as_deref(), Some("vhost:orders/eu"));
    }

    #[test]
    fn the_default_vhost_and_port() {
        let endpoint = Endpoint::parse("amqp://guest:guest@127.0.0.1/%2f").expect("parses");
        assert_eq!(endpoint.port, 5672);
        assert_eq!(endpoint.open_hostname().as_deref(), Some("vhost:/"));
    }

    #[test]
    fn amqps_is_refused_without_the_password() {
        let error = Endpoint::parse("amqps://guest:secret@127.0.0.1:5671/%2f").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("amqps:// is not supported"), "{text}");
        assert!(!text.contains("secret"), "{text}");
    }

    #[test]
    fn queue_names_are_one_percent_encoded_segment() {
        assert_eq!(queue_address("orders.eu-1_x~"), "/queues/orders.eu-1_x~");
        assert_eq!(queue_address("a/b c%é"), "/queues/a%2Fb%20c%25%C3%A9");
    }
}
