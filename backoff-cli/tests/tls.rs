//! `rabbit-backoff status` over `amqps://`, and what it says when the broker's
//! certificate is not trusted.
//!
//! Needs the TLS node of `scripts/tls.sh up` (TLS on 127.0.0.1:5671, plain
//! AMQP on 127.0.0.1:5676, certificates in `RABBIT_BACKOFF_TLS_DIR`, by
//! default /tmp/rabbit-backoff-tls) and is built only with the feature `tls`:
//! `cargo test -p rabbit-backoff-cli --features tls --test tls`
//! (`scripts/test.sh` starts the node, runs this, and stops it).

use std::process::{Command, Output};

use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use rabbit_backoff_test_support::cleanup::Cleanup;
use rabbit_backoff_test_support::declare;
use rabbit_backoff_test_support::publish::publish;
use rabbit_backoff_test_support::tls::{PLAIN, amqps};

/// `rabbit-backoff --url <url> status …`, the management API out of reach
/// (the TLS node has none).
fn status(url: &str, queue: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
        .args(["--url", url, "status", "--queue", queue, "--delays", "1s"])
        .args(["--management-url", "http://127.0.0.1:9", "--json"])
        .env_remove("AMQP_URL")
        .output()
        .expect("run the CLI")
}

async fn plain() -> Connection {
    Connection::connect(PLAIN, ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| {
            panic!("the TLS node's plain listener does not answer ({e}); run scripts/tls.sh up")
        })
}

/// A consumer's work queue and dead-letter queue, two dead letters in the
/// latter, deleted when dropped.
struct Fixture {
    queue: String,
}

impl Fixture {
    async fn new() -> Fixture {
        let queue = rabbit_backoff_test_support::broker::unique("cli.tls");
        let connection = plain().await;
        let channel = connection.create_channel().await.expect("channel");
        channel
            .confirm_select(Default::default())
            .await
            .expect("confirms");
        let dlq = format!("{queue}.dlq");
        for q in [&queue, &dlq] {
            declare::queue(&channel, q, FieldTable::default()).await;
        }
        for i in 0..2 {
            publish(
                &channel,
                "",
                &dlq,
                format!("{{\"n\":{i}}}").as_bytes(),
                BasicProperties::default(),
            )
            .await;
        }
        let _ = connection.close(200, "".into()).await;
        Fixture { queue }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        drop(Cleanup {
            queues: vec![self.queue.clone(), format!("{}.dlq", self.queue)],
            exchanges: Vec::new(),
            at: Some(PLAIN.to_owned()),
        });
    }
}

#[tokio::test]
async fn status_reads_the_queues_over_amqps() {
    let f = Fixture::new().await;
    let output = status(&amqps("localhost", "ca.pem"), &f.queue);
    assert!(output.status.success(), "{output:?}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let queues = doc["consumers"][0]["queues"].as_array().expect("queues");
    let dlq = queues
        .iter()
        .find(|q| q["role"] == "dead-letter")
        .expect("the dead-letter queue");
    assert_eq!(dlq["messages"], 2, "{doc}");
}

#[tokio::test]
async fn status_says_why_the_broker_is_not_trusted() {
    let f = Fixture::new().await;
    let output = status(&amqps("localhost", "other-ca.pem"), &f.queue);
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the server's certificate is not signed by a CA this client trusts")
            && stderr.contains("pass cacertfile="),
        "{stderr}"
    );
}
