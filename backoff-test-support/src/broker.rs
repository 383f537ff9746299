//! The test broker: its address, a connection that fails the test with the
//! way out when none answers, and names no other test uses (tests share the
//! broker).

use lapin::{Connection, ConnectionProperties};

/// The test broker's address: `AMQP_URL`, or RabbitMQ on 127.0.0.1:5672.
pub fn url() -> String {
    rabbit_backoff_runtime::amqp_url_from_env()
}

/// The test broker's management API: `RABBITMQ_MANAGEMENT_URL` (which
/// `scripts/broker.sh env VERSION` sets for a node of its own), or
/// `http://127.0.0.1:15672`.
pub fn management_url() -> String {
    std::env::var("RABBITMQ_MANAGEMENT_URL").unwrap_or_else(|_| "http://127.0.0.1:15672".to_owned())
}

/// The test broker's stream port: `RABBITMQ_STREAM_PORT`, or 5552.
pub fn stream_port() -> u16 {
    std::env::var("RABBITMQ_STREAM_PORT")
        .ok()
        .and_then(|port| port.parse().ok())
        .unwrap_or(5552)
}

/// A connection to the test broker; fails the test, with the way out, when
/// none answers.
pub async fn connect() -> Connection {
    let url = url();
    match Connection::connect(&url, ConnectionProperties::default()).await {
        Ok(connection) => connection,
        Err(e) => panic!(
            "no RabbitMQ answers at {url} ({e}). These tests need a real broker: run scripts/test.sh, which starts one, or set AMQP_URL."
        ),
    }
}

/// A name no other test uses: `rbt.<name>.<12 random hex digits>`.
pub fn unique(name: &str) -> String {
    format!(
        "rbt.{name}.{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}
