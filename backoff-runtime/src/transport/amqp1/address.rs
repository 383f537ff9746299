//! Where an AMQP 1.0 connection goes: the node, the credentials and the
//! virtual host of an `amqp://` or `amqps://` URI (the one the AMQP 0-9-1
//! side uses), and
//! the `/queues/<name>` address of a queue.

use lapin::uri::AMQPUri;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

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
    /// The node of `uri` (parsed without its TLS parameters: the socket
    /// under the connection is TCP or TLS, as for AMQP 0-9-1).
    pub(crate) fn of(uri: &AMQPUri) -> Endpoint {
        Endpoint {
            host: uri.authority.host.clone(),
            port: uri.authority.port,
            username: uri.authority.userinfo.username.clone(),
            password: uri.authority.userinfo.password.clone(),
            vhost: uri.vhost.clone(),
        }
    }

    /// `host:port`, for logs and [`Connection::node`](crate::transport::connection::Connection::node).
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

    fn parse(uri: &str) -> Endpoint {
        Endpoint::of(&uri.parse().expect("an AMQP URI"))
    }

    #[test]
    fn a_uri_gives_the_node_the_credentials_and_the_vhost() {
        let endpoint = parse("amqp://us%40er:p%3Ass@rabbit.local:5643/orders%2Feu");
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
        let endpoint = parse("amqp://guest:guest@127.0.0.1/%2f");
        assert_eq!(endpoint.port, 5672);
        assert_eq!(endpoint.open_hostname().as_deref(), Some("vhost:/"));
    }

    #[test]
    fn amqps_gives_its_node_as_amqp_does() {
        let endpoint = parse("amqps://guest:secret@rabbit.local/%2f");
        assert_eq!(endpoint.port, 5671);
        assert_eq!(endpoint.node(), "rabbit.local:5671");
        assert_eq!(endpoint.password, "secret");
    }

    #[test]
    fn queue_names_are_one_percent_encoded_segment() {
        assert_eq!(queue_address("orders.eu-1_x~"), "/queues/orders.eu-1_x~");
        assert_eq!(queue_address("a/b c%é"), "/queues/a%2Fb%20c%25%C3%A9");
    }
}
