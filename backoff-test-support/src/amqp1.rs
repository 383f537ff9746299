//! AMQP 1.0 as the tests and benches that speak it to RabbitMQ 4 themselves
//! set it up (feature `amqp1`): the address fe2o3-amqp takes, and a
//! connection as a careful user opens one. The quorum queue whose
//! `modified` deliveries RabbitMQ 4.3 holds back is declared over AMQP
//! 0-9-1: [`crate::declare::held_retry_queue`].

use fe2o3_amqp::connection::ConnectionHandle;

/// The AMQP URL `url` without its path, as fe2o3-amqp takes it: the address
/// and the SASL PLAIN credentials. RabbitMQ 4 picks the default vhost when
/// the open frame's hostname names none (`vhost:NAME` would).
pub fn address(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("amqp", url));
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    format!("{scheme}://{authority}")
}

/// Opens an AMQP 1.0 connection to the node of the AMQP URL `url`, as
/// container `container`, as a careful user of fe2o3-amqp opens one to
/// RabbitMQ 4: its own socket with `TCP_NODELAY` (fe2o3-amqp opening the
/// URL leaves Nagle's algorithm on, so a lone disposition waits for the
/// broker's delayed acknowledgement), SASL PLAIN with the URL's user.
/// Fails the test or bench, naming the URL, when it cannot.
pub async fn open(url: &str, container: String) -> ConnectionHandle<()> {
    let uri: lapin::uri::AMQPUri = url.parse().expect("an AMQP URI");
    let stream = tokio::net::TcpStream::connect((uri.authority.host.as_str(), uri.authority.port))
        .await
        .unwrap_or_else(|e| panic!("a TCP connection to {url}: {e}"));
    stream.set_nodelay(true).expect("TCP_NODELAY");
    fe2o3_amqp::Connection::builder()
        .container_id(container)
        .scheme("amqp")
        .sasl_profile(fe2o3_amqp::sasl_profile::SaslProfile::Plain {
            username: uri.authority.userinfo.username.clone(),
            password: uri.authority.userinfo.password.clone(),
        })
        .open_with_stream(stream)
        .await
        .unwrap_or_else(|e| panic!("an AMQP 1.0 connection to {url}: {e:?}"))
}
