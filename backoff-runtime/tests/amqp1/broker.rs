//! The broker under test: its `rabbitmqctl`, its version, its AMQP 1.0
//! connections, and a connection through the transport with its first
//! holding channel.

use std::sync::Arc;

use rabbit_backoff_runtime::transport::{
    AmqpTransport, Channel, Connection, Transport, TransportError,
};
use rabbit_backoff_test_support::broker::url;

/// The test broker's `rabbitmqctl`: the command in `RABBITMQCTL`, or the
/// installed one.
pub(crate) fn rabbitmqctl() -> std::process::Command {
    let line = std::env::var("RABBITMQCTL").unwrap_or_else(|_| "rabbitmqctl".to_owned());
    let mut words = line.split_whitespace();
    let mut command = std::process::Command::new(words.next().unwrap_or("rabbitmqctl"));
    command.args(words);
    command
}

pub(crate) fn rabbitmqctl_output(args: &[&str]) -> String {
    let output = rabbitmqctl().args(args).output().expect("rabbitmqctl runs");
    assert!(
        output.status.success(),
        "rabbitmqctl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A connection to `uri` and its first holding channel, a session of the
/// AMQP 1.0 connection it opens beside itself, as the runtime opens them.
pub(crate) async fn amqp1_connect(
    uri: &str,
) -> Result<(Arc<dyn Connection>, Arc<dyn Channel>), TransportError> {
    let connection = AmqpTransport::new(uri).connect().await?;
    match connection.open_holding_channel().await {
        Ok(channel) => Ok((connection, channel)),
        Err(e) => {
            connection.close().await;
            Err(e)
        }
    }
}

/// The broker's version as (major, minor).
pub(crate) fn broker_version() -> (u32, u32) {
    let status: serde_json::Value = serde_json::from_str(&rabbitmqctl_output(&[
        "-q",
        "status",
        "--formatter",
        "json",
    ]))
    .expect("rabbitmqctl status prints JSON");
    let version = status["rabbitmq_version"]
        .as_str()
        .expect("the status names the version");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The pids of the broker's AMQP 1.0 connections.
pub(crate) fn amqp1_connections() -> Vec<String> {
    rabbitmqctl_output(&["-q", "list_connections", "pid", "protocol"])
        .lines()
        .filter(|line| line.starts_with('<') && (line.contains("{1, 0}") || line.contains("{1,0}")))
        .filter_map(|line| line.split('\t').next().map(str::to_owned))
        .collect()
}

/// A connection through the transport with its first holding channel (over
/// AMQP 1.0), or `None` on a broker before 4.0, after asserting that it
/// refused AMQP 1.0, saying why.
pub(crate) async fn amqp1() -> Option<(Arc<dyn Connection>, Arc<dyn Channel>)> {
    let version = broker_version();
    let connection = amqp1_connect(&url()).await;
    if version < (4, 0) {
        let error = connection
            .err()
            .unwrap_or_else(|| panic!("RabbitMQ {version:?} accepted an AMQP 1.0 connection: is its AMQP 1.0 plugin enabled?"));
        assert!(
            matches!(&error, TransportError::Other(text) if text.contains("does not speak AMQP 1.0")),
            "RabbitMQ {version:?}: {error}"
        );
        eprintln!("RabbitMQ {version:?} refuses AMQP 1.0 as expected: {error}");
        return None;
    }
    Some(connection.unwrap_or_else(|e| panic!("RabbitMQ {version:?} refused AMQP 1.0: {e}")))
}
