//! What the command's tests share: the command itself, the test broker's
//! `rabbitmqctl`, and the queues they declare (a consumer's topology with
//! dead letters, the dead-letter index beside it).
#![allow(dead_code)]

use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use rabbit_backoff_test_support::broker::url;
use rabbit_backoff_test_support::cleanup::Cleanup;
pub use rabbit_backoff_test_support::declare;
pub use rabbit_backoff_test_support::publish::{publish, publish_with};
use std::process::{Command, Output};

pub fn unique(name: &str) -> String {
    rabbit_backoff_test_support::broker::unique(&format!("cli.{name}"))
}

pub fn cli(args: &[&str]) -> Output {
    cli_with(args, &[])
}

/// `rabbit-backoff dlq COMMAND --queue QUEUE --queue-type classic ARGS…`:
/// a dead-letter command on a consumer's classic queues.
pub fn dlq_classic(command: &str, queue: &str, args: &[&str]) -> Output {
    let mut all = vec!["dlq", command, "--queue", queue, "--queue-type", "classic"];
    all.extend_from_slice(args);
    cli(&all)
}

/// [`cli`] with these environment variables too.
pub fn cli_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
        .args(args)
        .env("AMQP_URL", url())
        .envs(env.iter().copied())
        .output()
        .expect("run the CLI")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub async fn connect(url: &str) -> Connection {
    Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| {
            panic!("no RabbitMQ at {url} ({e}); run scripts/test.sh, which starts one")
        })
}

/// The test broker's `rabbitmqctl`: the command in `RABBITMQCTL` (a program
/// and the arguments it starts with, as `scripts/broker.sh env VERSION`
/// prints), or the installed one.
pub fn ctl() -> Command {
    let line = std::env::var("RABBITMQCTL").unwrap_or_else(|_| "rabbitmqctl".to_owned());
    let mut words = line.split_whitespace();
    let mut command = Command::new(words.next().unwrap_or("rabbitmqctl"));
    command.args(words);
    command
}

pub fn rabbitmqctl(args: &[&str]) {
    let output = ctl().args(args).output().expect("rabbitmqctl");
    assert!(
        output.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Declares the default topology of `queue` with the CLI's own definitions,
/// puts `n` dead letters in its DLQ, and deletes everything when dropped.
pub struct Fixture {
    pub queue: String,
    pub delays: &'static str,
}

impl Fixture {
    pub async fn new(name: &str, dead_letters: usize) -> Fixture {
        let fixture = Fixture {
            queue: unique(name),
            delays: "1s,2s",
        };
        let connection = connect(&url()).await;
        let channel = connection.create_channel().await.unwrap();
        channel.confirm_select(Default::default()).await.unwrap();
        for q in fixture.queues() {
            declare::queue(&channel, &q, FieldTable::default()).await;
        }
        for i in 0..dead_letters {
            let mut headers = FieldTable::default();
            headers.insert(
                "x-error".into(),
                AMQPValue::LongString(format!("error {i}").into_bytes().into()),
            );
            headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(2));
            headers.insert(
                "x-original-queue".into(),
                AMQPValue::LongString(fixture.queue.as_bytes().into()),
            );
            publish(
                &channel,
                "",
                &format!("{}.dlq", fixture.queue),
                format!("{{\"n\":{i}}}").as_bytes(),
                BasicProperties::default()
                    .with_message_id(format!("m-{i}").into())
                    .with_headers(headers),
            )
            .await;
        }
        let _ = connection.close(200, "".into()).await;
        fixture
    }

    pub fn queues(&self) -> Vec<String> {
        let q = &self.queue;
        vec![
            q.clone(),
            format!("{q}.retry_1000ms"),
            format!("{q}.retry_2000ms"),
            format!("{q}.dlq"),
        ]
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        drop(Cleanup {
            queues: self.queues(),
            exchanges: Vec::new(),
            at: None,
        });
    }
}

/// The article's names, as `topology` flags.
pub fn article(queue: &str) -> Vec<String> {
    [
        "--queue",
        queue,
        "--delays",
        "1s,2s",
        "--exchange",
        "work_exchange",
        "--work-routing-key",
        "work",
        "--retry-exchange",
        "retry_exchange",
        "--retry-queue",
        "retry_{ms}ms",
        "--dead-letter-exchange",
        "dlx_exchange",
        "--dead-letter-queue",
        "dead_letter_queue",
        "--dead-letter-routing-key",
        "dead",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Puts dead letters of two kinds of error in a fixture's DLQ, through its
/// dead-letter exchange (`<queue>.dlx`, declared and bound here, as the
/// consumer's topology does): even ids "order N not found" (permanent), odd
/// ids "timeout after N ms" (exhausted); message 0 carries headers of every
/// AMQP type.
pub async fn two_kinds(f: &Fixture, n: usize) {
    two_kinds_in(f, 0..n).await;
}

/// [`two_kinds`] with the messages `ids`: message 0 carries every AMQP type.
pub async fn two_kinds_in(f: &Fixture, ids: std::ops::Range<usize>) {
    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    channel.confirm_select(Default::default()).await.unwrap();
    let dlx = format!("{}.dlx", f.queue);
    let dlq = format!("{}.dlq", f.queue);
    declare::exchange(&channel, &dlx, lapin::ExchangeKind::Direct).await;
    declare::bind(&channel, &dlq, &dlx, &dlq).await;
    let text = |s: &str| AMQPValue::LongString(s.as_bytes().into());
    for i in ids {
        let mut headers = FieldTable::default();
        let (error, reason) = if i % 2 == 0 {
            (format!("order {i} not found"), "permanent")
        } else {
            (format!("timeout after {i} ms"), "exhausted")
        };
        headers.insert("x-error".into(), text(&error));
        headers.insert("x-dead-letter-reason".into(), text(reason));
        headers.insert(
            "x-failed-at".into(),
            text(&format!("2026-12-02T10:00:{:02}.000Z", i % 60)),
        );
        headers.insert("x-original-queue".into(), text(&f.queue));
        if i == 0 {
            let mut nested = FieldTable::default();
            nested.insert("depth".into(), AMQPValue::ShortShortInt(-1));
            // Not NaN: RabbitMQ (Erlang) cannot parse a NaN double and closes the connection.
            headers.insert("f64".into(), AMQPValue::Double(-0.1));
            headers.insert("f32".into(), AMQPValue::Float(0.1));
            headers.insert("i16".into(), AMQPValue::ShortInt(-32000));
            headers.insert("bytes".into(), AMQPValue::ByteArray(vec![0u8, 255].into()));
            headers.insert(
                "latin1".into(),
                AMQPValue::LongString(vec![0xe9u8, 0x74, 0xe9].into()),
            );
            headers.insert("stamp".into(), AMQPValue::Timestamp(1_796_208_000));
            headers.insert("nested".into(), AMQPValue::FieldTable(nested));
            headers.insert(
                "list".into(),
                AMQPValue::FieldArray(vec![AMQPValue::Void, AMQPValue::Boolean(true)].into()),
            );
        }
        publish_with(
            &channel,
            &dlx,
            &dlq,
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            &[b'{', 0xff, b'}'],
            BasicProperties::default()
                .with_message_id(format!("m-{i}").into())
                .with_content_type("application/json".into())
                .with_priority(3)
                .with_timestamp(1_796_208_000)
                .with_headers(headers),
        )
        .await;
    }
    let _ = connection.close(200, "".into()).await;
}

pub fn json(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {output:?}"))
}

/// Declares the dead-letter index of a fixture (two streams, the entries
/// bound to `<queue>.dlx` with the DLQ's key, as the framework declares
/// them); deletes them and the exchange when dropped.
pub struct Index {
    pub queue: String,
}

impl Index {
    pub async fn declare(f: &Fixture) -> Index {
        // The dead-letter exchange and the DLQ's binding first.
        two_kinds(f, 0).await;
        let connection = connect(&url()).await;
        let channel = connection.create_channel().await.unwrap();
        let dlq = format!("{}.dlq", f.queue);
        let stream = declare::arguments(&[("x-queue-type", declare::text("stream"))]);
        for name in [format!("{dlq}.index"), format!("{dlq}.index.removed")] {
            declare::queue(&channel, &name, stream.clone()).await;
        }
        declare::bind(
            &channel,
            &format!("{dlq}.index"),
            &format!("{}.dlx", f.queue),
            &dlq,
        )
        .await;
        let _ = connection.close(200, "".into()).await;
        Index {
            queue: f.queue.clone(),
        }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        let queue = &self.queue;
        drop(Cleanup {
            queues: vec![
                format!("{queue}.dlq.index"),
                format!("{queue}.dlq.index.removed"),
            ],
            exchanges: vec![format!("{queue}.dlx")],
            at: None,
        });
    }
}
