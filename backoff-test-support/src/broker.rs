//! The test broker: its address, a connection that fails the test with the
//! way out when none answers, and names no other test uses (tests share the
//! broker).

use lapin::{Connection, ConnectionProperties};

/// The test broker's address: `AMQP_URL`, or RabbitMQ on 127.0.0.1:5672.
pub fn url() -> String {
    rabbit_backoff_runtime::amqp_url_from_env()
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
