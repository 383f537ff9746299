//! The `rabbit-backoff` command against the real broker.

use std::process::{Command, Output};

use lapin::options::{BasicPublishOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};

use rabbit_backoff_test_support::broker::url;
use rabbit_backoff_test_support::cleanup::Cleanup;

fn unique(name: &str) -> String {
    rabbit_backoff_test_support::broker::unique(&format!("cli.{name}"))
}

fn cli(args: &[&str]) -> Output {
    cli_with(args, &[])
}

/// [`cli`] with these environment variables too.
fn cli_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
        .args(args)
        .env("AMQP_URL", url())
        .envs(env.iter().copied())
        .output()
        .expect("run the CLI")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn connect(url: &str) -> Connection {
    Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| {
            panic!("no RabbitMQ at {url} ({e}); run scripts/test.sh, which starts one")
        })
}

/// The test broker's `rabbitmqctl`: the command in `RABBITMQCTL` (a program
/// and the arguments it starts with, as `scripts/broker.sh env VERSION`
/// prints), or the installed one.
fn ctl() -> Command {
    let line = std::env::var("RABBITMQCTL").unwrap_or_else(|_| "rabbitmqctl".to_owned());
    let mut words = line.split_whitespace();
    let mut command = Command::new(words.next().unwrap_or("rabbitmqctl"));
    command.args(words);
    command
}

fn rabbitmqctl(args: &[&str]) {
    let output = ctl().args(args).output().expect("rabbitmqctl");
    assert!(
        output.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Declares the default topology of `queue` with the CLI's own definitions,
/// puts `n` dead letters in its DLQ, and deletes everything when dropped.
struct Fixture {
    queue: String,
    delays: &'static str,
}

impl Fixture {
    async fn new(name: &str, dead_letters: usize) -> Fixture {
        let fixture = Fixture {
            queue: unique(name),
            delays: "1s,2s",
        };
        let connection = connect(&url()).await;
        let channel = connection.create_channel().await.unwrap();
        channel.confirm_select(Default::default()).await.unwrap();
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        for q in fixture.queues() {
            channel
                .queue_declare(q.as_str().into(), durable, FieldTable::default())
                .await
                .unwrap();
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
            channel
                .basic_publish(
                    "".into(),
                    format!("{}.dlq", fixture.queue).as_str().into(),
                    BasicPublishOptions::default(),
                    format!("{{\"n\":{i}}}").as_bytes(),
                    BasicProperties::default()
                        .with_message_id(format!("m-{i}").into())
                        .with_headers(headers),
                )
                .await
                .unwrap()
                .await
                .unwrap();
        }
        let _ = connection.close(200, "".into()).await;
        fixture
    }

    fn queues(&self) -> Vec<String> {
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

#[tokio::test]
async fn status_reports_tiers_and_fails_above_a_threshold() {
    let f = Fixture::new("status", 3).await;
    let old_tier = format!("{}.retry_7ms", f.queue);
    {
        let connection = connect(&url()).await;
        let channel = connection.create_channel().await.unwrap();
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        channel
            .queue_declare(old_tier.as_str().into(), durable, FieldTable::default())
            .await
            .unwrap();
    }
    let table = cli(&["status", "--queue", &f.queue, "--delays", f.delays]);
    assert!(table.status.success(), "{table:?}");
    let text = stdout(&table);
    assert!(
        text.contains(&format!("{}.retry_2000ms", f.queue)),
        "{text}"
    );
    assert!(
        text.contains("retry (old schedule)"),
        "the management API finds the old tier: {text}"
    );

    let json = cli(&[
        "status", "--queue", &f.queue, "--delays", f.delays, "--json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let queues = doc["consumers"][0]["queues"].as_array().unwrap();
    let dlq = queues.iter().find(|q| q["role"] == "dead-letter").unwrap();
    assert_eq!(dlq["messages"], 3);
    // One node, as the management API counts them: no warning about
    // classic queues on a cluster, though the consumer's are classic.
    assert_eq!(doc["running_nodes"], 1, "{doc}");
    assert_eq!(doc["classic_on_cluster"], serde_json::json!([]), "{doc}");

    let ok = cli(&[
        "status",
        "--queue",
        &f.queue,
        "--delays",
        f.delays,
        "--fail-above",
        "3",
    ]);
    assert_eq!(ok.status.code(), Some(0));
    let over = cli(&[
        "status",
        "--queue",
        &f.queue,
        "--delays",
        f.delays,
        "--fail-above",
        "2",
    ]);
    assert_eq!(over.status.code(), Some(2), "{over:?}");
    assert!(String::from_utf8_lossy(&over.stderr).contains("holds 3 dead letters"));

    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    channel
        .queue_delete(old_tier.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn dlq_commands_peek_replay_and_refuse_an_unconfirmed_discard() {
    let f = Fixture::new("dlq", 4).await;
    let peek = cli(&[
        "dlq",
        "peek",
        "--queue",
        &f.queue,
        "--json",
        "--error",
        "error [12]",
    ]);
    assert!(peek.status.success(), "{peek:?}");
    let report: serde_json::Value = serde_json::from_slice(&peek.stdout).unwrap();
    let ids: Vec<&str> = report["matched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m-1", "m-2"]);
    assert_eq!(report["kept"], 4);

    let refused = cli(&["dlq", "discard", "--queue", &f.queue]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));

    let dry = cli(&["dlq", "replay", "--queue", &f.queue, "--dry-run"]);
    assert!(stdout(&dry).contains("would replay 4"), "{}", stdout(&dry));
    let replay = cli(&[
        "dlq", "replay", "--queue", &f.queue, "--limit", "3", "--rate", "100/s",
    ]);
    assert!(
        stdout(&replay).contains("replayed 3, 1 left"),
        "{}",
        stdout(&replay)
    );
    let discard = cli(&["dlq", "discard", "--queue", &f.queue, "--yes"]);
    assert!(
        stdout(&discard).contains("discarded 1, 0 left"),
        "{}",
        stdout(&discard)
    );

    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    let q = channel
        .queue_declare(
            f.queue.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        q.message_count(),
        3,
        "the replayed messages are in the work queue"
    );
}

#[tokio::test]
async fn exported_definitions_import_into_a_fresh_vhost() {
    let vhost = unique("vhost");
    let file = std::env::temp_dir().join(format!("{vhost}.json"));
    let export = cli(&[
        "topology",
        "--queue",
        "orders",
        "--delays",
        "5s,15s,60s",
        "--queue-type",
        "quorum",
        "--export-definitions",
        file.to_str().unwrap(),
        "--vhost",
        &vhost,
    ]);
    assert!(export.status.success(), "{export:?}");
    rabbitmqctl(&["add_vhost", &vhost]);
    struct DeleteVhost(String);
    impl Drop for DeleteVhost {
        fn drop(&mut self) {
            let _ = ctl().args(["delete_vhost", &self.0]).output();
        }
    }
    let _delete = DeleteVhost(vhost.clone());
    rabbitmqctl(&["set_permissions", "-p", &vhost, "guest", ".*", ".*", ".*"]);
    rabbitmqctl(&["import_definitions", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);

    let broker = url();
    let vhost_url = format!(
        "{}/{}",
        &broker[..broker.rfind('/').expect("a vhost in the URL")],
        vhost.replace('/', "%2f")
    );
    let connection = connect(&vhost_url).await;
    let channel = connection.create_channel().await.unwrap();
    for q in [
        "orders",
        "orders.retry_5000ms",
        "orders.retry_15000ms",
        "orders.retry_60000ms",
        "orders.dlq",
    ] {
        channel
            .queue_declare(
                q.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("{q} was imported: {e}"));
    }
    // The imported arguments are the ones the consumer declares: a routed
    // message flows orders.retry exchange → retry queue.
    channel.confirm_select(Default::default()).await.unwrap();
    let confirm = channel
        .basic_publish(
            "orders.retry".into(),
            "orders.retry_5000ms".into(),
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            b"{}",
            BasicProperties::default(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(
        confirm.take_message().is_none(),
        "routed through the imported binding"
    );
    let conflict = connection.create_channel().await.unwrap();
    let mut args = FieldTable::default();
    args.insert("x-message-ttl".into(), AMQPValue::LongLongInt(1));
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    let refused = conflict
        .queue_declare(
            "orders.retry_5000ms".into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            args,
        )
        .await;
    assert!(
        refused.is_err(),
        "the imported queue carries its x-message-ttl"
    );
    let _ = connection.close(200, "".into()).await;
}

#[test]
fn help_explains_every_command() {
    let help = cli(&["--help"]);
    let text = stdout(&help);
    for command in ["status", "dlq", "topology"] {
        assert!(text.contains(command), "{text}");
    }
    let peek = stdout(&cli(&["dlq", "peek", "--help"]));
    assert!(
        peek.contains("redelivered"),
        "peek's help says the flag is set: {peek}"
    );
    let bad = cli(&["topology", "--queue", "orders", "--delays", "5x"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown unit"));
}

/// The article's names, as `topology` flags.
fn article(queue: &str) -> Vec<String> {
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

#[test]
fn topology_follows_retry_return_in_the_table_and_the_definitions() {
    let run = |extra: &[&str]| {
        let mut args: Vec<String> = vec!["topology".into()];
        args.extend(article("work_queue"));
        args.extend(extra.iter().map(|s| s.to_string()));
        cli(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let table = run(&["--retry-return", "exchange"]);
    assert!(table.status.success(), "{table:?}");
    let text = stdout(&table);
    let retry_line = text
        .lines()
        .find(|l| l.starts_with("retry_1000ms "))
        .unwrap_or_else(|| panic!("a retry queue row: {text}"));
    assert!(
        retry_line.contains("x-dead-letter-exchange=\"work_exchange\"")
            && retry_line.contains("x-dead-letter-routing-key=\"work\""),
        "{retry_line}"
    );
    // The default route, for comparison.
    let text = stdout(&run(&[]));
    let retry_line = text
        .lines()
        .find(|l| l.starts_with("retry_1000ms "))
        .unwrap_or_else(|| panic!("a retry queue row: {text}"));
    assert!(
        retry_line.contains("x-dead-letter-exchange=\"\"")
            && retry_line.contains("x-dead-letter-routing-key=\"work_queue\""),
        "{retry_line}"
    );

    let export = run(&["--retry-return", "exchange", "--export-definitions", "-"]);
    assert!(export.status.success(), "{export:?}");
    let doc: serde_json::Value = serde_json::from_slice(&export.stdout).expect("JSON");
    let queues = doc["queues"].as_array().expect("queues");
    let retry_queues: Vec<_> = queues
        .iter()
        .filter(|q| q["name"].as_str().is_some_and(|n| n.starts_with("retry_")))
        .collect();
    assert_eq!(retry_queues.len(), 2);
    for q in retry_queues {
        assert_eq!(q["arguments"]["x-dead-letter-exchange"], "work_exchange");
        assert_eq!(q["arguments"]["x-dead-letter-routing-key"], "work");
    }

    let fanout = run(&["--retry-return", "exchange", "--exchange-type", "fanout"]);
    assert!(!fanout.status.success());
    let error = String::from_utf8_lossy(&fanout.stderr);
    assert!(
        error.contains("fanout") && error.contains("retry_return = \"queue\""),
        "{error}"
    );
    let bad = run(&["--retry-return", "work_exchange"]);
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("not a retry route"),
        "{bad:?}"
    );
}

#[test]
fn topology_check_names_every_missing_object() {
    let queue = unique("passive");
    let check = cli(&[
        "topology", "--queue", &queue, "--delays", "1s,2s", "--check",
    ]);
    assert_eq!(check.status.code(), Some(2), "{check:?}");
    let error = String::from_utf8_lossy(&check.stderr);
    for missing in [
        format!("exchange `{queue}`"),
        format!("exchange `{queue}.retry`"),
        format!("exchange `{queue}.dlx`"),
        format!("queue `{queue}`"),
        format!("queue `{queue}.retry_1000ms`"),
        format!("queue `{queue}.retry_2000ms`"),
        format!("queue `{queue}.dlq`"),
    ] {
        assert!(error.contains(&missing), "{missing} in {error}");
    }
    assert!(error.contains("7 of its objects do not exist"), "{error}");
}

#[tokio::test]
async fn status_follows_retry_return_and_names_arguments_that_differ() {
    // A retry tier declared the framework's way (back through the default
    // exchange), operated as the article's topology (through the work exchange).
    let queue = unique("route");
    let tier = format!("{queue}.retry_1000ms");
    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    let mut arguments = FieldTable::default();
    arguments.insert("x-message-ttl".into(), AMQPValue::LongInt(1000));
    arguments.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString("".into()),
    );
    arguments.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(queue.as_bytes().into()),
    );
    channel
        .queue_declare(
            tier.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            arguments,
        )
        .await
        .unwrap();
    let status = |route: &str| {
        cli(&[
            "status",
            "--queue",
            &queue,
            // Declared as the article declares it: classic.
            "--queue-type",
            "classic",
            "--delays",
            "1s",
            "--exchange",
            "work_exchange",
            "--work-routing-key",
            "work",
            "--retry-return",
            route,
            "--json",
        ])
    };
    // The management API lists a queue a moment after it is declared (later
    // still while other suites load the machine): ask until it lists the tier.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let doc = loop {
        let other = status("exchange");
        assert!(other.status.success(), "{other:?}");
        let doc: serde_json::Value = serde_json::from_slice(&other.stdout).expect("JSON");
        let listed = doc["argument_differences"]
            .as_array()
            .is_some_and(|d| !d.is_empty());
        if listed || std::time::Instant::now() > deadline {
            break doc;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    let differences = doc["argument_differences"].as_array().expect("a list");
    let named: Vec<_> = differences
        .iter()
        .map(|d| {
            (
                d["queue"].as_str().unwrap_or_default(),
                d["argument"].as_str().unwrap_or_default(),
                d["expected"].clone(),
                d["actual"].clone(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            (
                tier.as_str(),
                "x-dead-letter-exchange",
                serde_json::json!("work_exchange"),
                serde_json::json!("")
            ),
            (
                tier.as_str(),
                "x-dead-letter-routing-key",
                serde_json::json!("work"),
                serde_json::json!(queue)
            ),
        ]
    );
    // Listed now: the route the tier was declared with differs in nothing.
    let same = status("queue");
    let doc: serde_json::Value = serde_json::from_slice(&same.stdout).expect("JSON");
    assert_eq!(doc["argument_differences"], serde_json::json!([]), "{doc}");
    let table = cli(&[
        "status",
        "--queue",
        &queue,
        "--queue-type",
        "classic",
        "--delays",
        "1s",
        "--retry-return",
        "exchange",
    ]);
    let notes = String::from_utf8_lossy(&table.stderr);
    assert!(
        notes.contains(&format!("queue {tier} has x-dead-letter-exchange = \"\"")),
        "{notes}"
    );
    channel
        .queue_delete(tier.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}

/// Puts dead letters of two kinds of error in a fixture's DLQ, through its
/// dead-letter exchange (`<queue>.dlx`, declared and bound here, as the
/// consumer's topology does): even ids "order N not found" (permanent), odd
/// ids "timeout after N ms" (exhausted); message 0 carries headers of every
/// AMQP type.
async fn two_kinds(f: &Fixture, n: usize) {
    two_kinds_in(f, 0..n).await;
}

/// [`two_kinds`] with the messages `ids`: message 0 carries every AMQP type.
async fn two_kinds_in(f: &Fixture, ids: std::ops::Range<usize>) {
    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    channel.confirm_select(Default::default()).await.unwrap();
    let dlx = format!("{}.dlx", f.queue);
    let dlq = format!("{}.dlq", f.queue);
    channel
        .exchange_declare(
            dlx.as_str().into(),
            lapin::ExchangeKind::Direct,
            lapin::options::ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    channel
        .queue_bind(
            dlq.as_str().into(),
            dlx.as_str().into(),
            dlq.as_str().into(),
            Default::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
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
        channel
            .basic_publish(
                dlx.as_str().into(),
                dlq.as_str().into(),
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
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let _ = connection.close(200, "".into()).await;
}

fn json(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {output:?}"))
}

#[tokio::test]
async fn groups_group_replay_and_discard_and_a_lossless_export_import() {
    let f = Fixture::new("groups", 0).await;
    two_kinds(&f, 10).await;
    let q = f.queue.as_str();

    let groups = json(&cli(&[
        "dlq",
        "groups",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--json",
    ]));
    let groups = groups.as_array().unwrap();
    assert_eq!(groups.len(), 2, "{groups:?}");
    for group in groups {
        assert_eq!(group["count"], 5);
        // The fixture's queues have no dead-letter index beside them.
        assert_eq!(group["source"], "pass");
        assert!(group["index_protocol"].is_null(), "{group}");
        assert_eq!(group["id"].as_str().unwrap().len(), 12);
        assert!(
            group["first_failed_at"].as_str().unwrap() < group["last_failed_at"].as_str().unwrap()
        );
    }
    let by = |fingerprint: &str| {
        groups
            .iter()
            .find(|g| g["fingerprint"] == fingerprint)
            .unwrap_or_else(|| panic!("no group {fingerprint}: {groups:?}"))
    };
    let missing = by("order <n> not found");
    let timeouts = by("timeout after <n> ms");
    assert_eq!(missing["reason"], "permanent");
    assert_eq!(missing["example_message_id"], "m-0");
    assert_eq!(timeouts["reason"], "exhausted");
    // Stable across runs.
    let again = json(&cli(&[
        "dlq",
        "groups",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--json",
    ]));
    assert_eq!(again.as_array().unwrap(), groups);
    let table = stdout(&cli(&[
        "dlq",
        "groups",
        "--queue",
        q,
        "--queue-type",
        "classic",
    ]));
    assert!(table.contains("10 dead letters in 2 groups"), "{table}");
    assert!(
        table.contains("read with a pass over the queue: there is no index beside the queue"),
        "{table}"
    );

    // Export everything, and one group.
    let dir = std::env::temp_dir().join(unique("export"));
    std::fs::create_dir_all(&dir).unwrap();
    let all = dir.join("all.jsonl");
    let exported = cli(&[
        "dlq",
        "export",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--jsonl",
        all.to_str().unwrap(),
    ]);
    assert!(stdout(&exported).contains("exported 10"), "{exported:?}");
    let one_group = dir.join("group.jsonl");
    let id = missing["id"].as_str().unwrap();
    cli(&[
        "dlq",
        "export",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--group",
        id,
        "--jsonl",
        one_group.to_str().unwrap(),
    ]);
    let lines = std::fs::read_to_string(&one_group).unwrap();
    assert_eq!(lines.lines().count(), 5);
    assert!(
        lines.contains(r#""f64":{"type":"f64","value":-0.1}"#),
        "{lines}"
    );
    assert!(
        lines.contains(r#""latin1":{"type":"longstr_base64""#),
        "{lines}"
    );

    // Discard all, import them back: the same bytes, headers and types.
    let discarded = cli(&[
        "dlq",
        "discard",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--yes",
    ]);
    assert!(
        stdout(&discarded).contains("discarded 10, 0 left"),
        "{discarded:?}"
    );
    let imported = cli(&[
        "dlq",
        "import",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--jsonl",
        all.to_str().unwrap(),
    ]);
    assert!(stdout(&imported).contains("imported 10"), "{imported:?}");
    let round_trip = dir.join("again.jsonl");
    cli(&[
        "dlq",
        "export",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--jsonl",
        round_trip.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read_to_string(&round_trip).unwrap(),
        std::fs::read_to_string(&all).unwrap(),
        "an export of the import is the export"
    );
    // The import took the dead letters' own route: the dead-letter exchange
    // and routing key, field for field.
    let route = |path: &std::path::Path| -> Vec<(String, String)> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| {
                let record: serde_json::Value = serde_json::from_str(line).unwrap();
                (
                    record["exchange"].as_str().unwrap_or("").to_owned(),
                    record["routing_key"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    };
    let expected = (format!("{q}.dlx"), format!("{q}.dlq"));
    assert_eq!(route(&all), vec![expected.clone(); 10], "exported route");
    assert_eq!(route(&round_trip), vec![expected; 10], "imported route");

    // A bad line: nothing is imported, and the error names the line.
    let bad = dir.join("bad.jsonl");
    let first = std::fs::read_to_string(&all)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    std::fs::write(
        &bad,
        format!("{first}\n{{\"properties\":{{}},\"body\":\"%%\"}}\n"),
    )
    .unwrap();
    let refused = cli(&[
        "dlq",
        "import",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--jsonl",
        bad.to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        why.contains("bad.jsonl:2") && why.contains("base64"),
        "{why}"
    );
    let peek = json(&cli(&["dlq", "peek", "--queue", q, "--json"]));
    assert_eq!(peek["kept"], 10, "nothing of the bad file was imported");

    // Replay one group; discard the other.
    let replayed = json(&cli(&[
        "dlq",
        "replay",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--group",
        timeouts["id"].as_str().unwrap(),
        "--json",
    ]));
    let ids: Vec<&str> = replayed["matched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m-1", "m-3", "m-5", "m-7", "m-9"]);
    assert_eq!(replayed["kept"], 5);
    let left = json(&cli(&[
        "dlq",
        "groups",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--json",
    ]));
    assert_eq!(left.as_array().unwrap().len(), 1);
    assert_eq!(left[0]["id"], missing["id"]);
    let discarded = cli(&["dlq", "discard", "--queue", q, "--group", id, "--yes"]);
    assert!(
        stdout(&discarded).contains("discarded 5, 0 left"),
        "{discarded:?}"
    );
    let one = cli(&["dlq", "peek", "--queue", q, "--message-id", "m-3"]);
    assert!(
        stdout(&one).contains("matched 0"),
        "replayed messages left the DLQ"
    );

    // Without its dead-letter exchange, an import says so and adds nothing.
    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    channel
        .exchange_delete(format!("{q}.dlx").as_str().into(), Default::default())
        .await
        .unwrap();
    let _ = connection.close(200, "".into()).await;
    let refused = cli(&[
        "dlq",
        "import",
        "--queue",
        q,
        "--queue-type",
        "classic",
        "--jsonl",
        all.to_str().unwrap(),
    ]);
    assert!(!refused.status.success(), "{refused:?}");
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains(&format!("'{q}.dlx'")), "{why}");
    let peek = json(&cli(&["dlq", "peek", "--queue", q, "--json"]));
    assert_eq!(peek["kept"], 0, "nothing was imported");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Declares a consumer topology by hand, as an operator or another tool
/// would: `retry` TTLs, dead-letter exchange and queue named freely.
async fn hand_declared(
    channel: &lapin::Channel,
    work: &str,
    dlx: &str,
    dlq: &str,
    retries: &[(&str, i64)],
) {
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    let text = |s: &str| AMQPValue::LongString(s.as_bytes().into());
    channel
        .exchange_declare(
            dlx.into(),
            lapin::ExchangeKind::Direct,
            lapin::options::ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut args = FieldTable::default();
    args.insert("x-dead-letter-exchange".into(), text(dlx));
    args.insert("x-dead-letter-routing-key".into(), text(dlq));
    channel
        .queue_declare(work.into(), durable, args)
        .await
        .unwrap();
    channel
        .queue_declare(dlq.into(), durable, FieldTable::default())
        .await
        .unwrap();
    channel
        .queue_bind(
            dlq.into(),
            dlx.into(),
            dlq.into(),
            Default::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    for (name, ttl) in retries {
        let mut args = FieldTable::default();
        args.insert("x-message-ttl".into(), AMQPValue::LongLongInt(*ttl));
        args.insert("x-dead-letter-exchange".into(), text(""));
        args.insert("x-dead-letter-routing-key".into(), text(work));
        channel
            .queue_declare((*name).into(), durable, args)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn status_without_a_queue_finds_every_consumer_topology() {
    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    let a = unique("found");
    let b = unique("adopted");
    let (a_tier1, a_tier2) = (format!("{a}.retry_1000ms"), format!("{a}.retry_9000ms"));
    let (b_dlx, b_dlq, b_tier) = (format!("{b}-dlx"), format!("{b}-dead"), format!("{b}-wait"));
    hand_declared(
        &channel,
        &a,
        &format!("{a}.dlx"),
        &format!("{a}.dlq"),
        &[(&a_tier1, 1000), (&a_tier2, 9000)],
    )
    .await;
    hand_declared(&channel, &b, &b_dlx, &b_dlq, &[(&b_tier, 500)]).await;
    for i in 0..3 {
        channel
            .basic_publish(
                "".into(),
                b_dlq.as_str().into(),
                BasicPublishOptions::default(),
                format!("{i}").as_bytes(),
                BasicProperties::default(),
            )
            .await
            .unwrap();
    }
    // The management API samples queue depths every few seconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let (found_a, found_b) = loop {
        let status = json(&cli(&["status", "--json"]));
        let consumers = status["consumers"].as_array().unwrap().clone();
        let find = |q: &str| consumers.iter().find(|c| c["queue"] == q).cloned();
        if let (Some(fa), Some(fb)) = (find(&a), find(&b))
            && fb["dead_letter"]["messages"] == 3
        {
            break (fa, fb);
        }
        assert!(std::time::Instant::now() < deadline, "not found: {status}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert_eq!(found_a["dead_letter"]["name"], format!("{a}.dlq"));
    let tiers: Vec<&str> = found_a["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tiers, [a_tier1.as_str(), a_tier2.as_str()]);
    assert_eq!(found_b["dead_letter"]["name"], b_dlq);
    assert_eq!(found_b["tiers"][0]["delay_ms"], 500);
    let table = stdout(&cli(&["status"]));
    assert!(
        table.contains(&b_tier) && table.contains("dead-letter"),
        "{table}"
    );

    for q in [
        &a,
        &a_tier1,
        &a_tier2,
        &format!("{a}.dlq"),
        &b,
        &b_dlq,
        &b_tier,
    ] {
        let _ = channel
            .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    for x in [format!("{a}.dlx"), b_dlx] {
        let _ = channel
            .exchange_delete(x.as_str().into(), Default::default())
            .await;
    }
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn a_pass_killed_midway_loses_nothing_and_the_next_puts_the_order_right() {
    const N: usize = 2500;
    let f = Fixture::new("killed", N).await;
    let marker = format!("{}.dlq.pass", f.queue);
    let mut pass = Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
        .args(["dlq", "groups", "--queue", &f.queue])
        .env("AMQP_URL", url())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it (SIGKILL) once it has started moving messages to the back.
    let connection = connect(&url()).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let probe = connection.create_channel().await.unwrap();
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        if probe
            .queue_declare(marker.as_str().into(), passive, FieldTable::default())
            .await
            .is_ok()
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pass never moved messages"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    pass.kill().unwrap();
    pass.wait().unwrap();
    // The killed pass's flag is ready again once the broker has seen its
    // connection close: on a loaded machine that can take longer than the
    // few seconds the next pass waits for it (`FLAG_RETURN`). A pass killed
    // before it raised its flag rotated nothing, and leaves none to wait for.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let probe = connection.create_channel().await.unwrap();
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let flag = probe
            .queue_declare(marker.as_str().into(), passive, FieldTable::default())
            .await;
        if flag.is_ok_and(|q| q.message_count() > 0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let peek = json(&cli(&["dlq", "peek", "--queue", &f.queue, "--json"]));
    let ids: Vec<usize> = peek["matched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message_id"].as_str().unwrap()[2..].parse().unwrap())
        .collect();
    let mut first_seen = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for id in &ids {
        if seen.insert(*id) {
            first_seen.push(*id);
        }
    }
    assert_eq!(
        first_seen,
        (0..N).collect::<Vec<_>>(),
        "all there, in order"
    );
    let duplicates = ids.len() - N;
    println!("killed pass: {duplicates} duplicates");
    assert!(
        duplicates <= 275,
        "at most the copies in flight: {duplicates}"
    );
    let _ = connection
        .create_channel()
        .await
        .unwrap()
        .queue_delete(marker.as_str().into(), QueueDeleteOptions::default())
        .await;
}

#[tokio::test]
async fn a_dead_letter_nested_18000_levels_deep_is_shown_with_a_note_and_left_intact() {
    use rabbit_backoff::rules::deep_headers::{pack, unpack};
    use rabbit_backoff::rules::headers::DEEP_HEADERS;
    use rabbit_backoff::transport::amqp::AmqpTransport;
    use rabbit_backoff::transport::{Confirm, Connection as _, Publication};

    let f = Fixture::new("deep", 1).await;
    let q = f.queue.as_str();
    let dlq = format!("{q}.dlq");
    let entries = rabbit_backoff_test_support::deep_headers::entries(18_000, false);
    // Published through the runtime's connection, which writes the headers
    // the flat table stands for.
    let mut flat = FieldTable::default();
    flat.insert(
        DEEP_HEADERS.into(),
        AMQPValue::ByteArray(pack(&entries).unwrap().into()),
    );
    let connection = AmqpTransport::new(url()).connect_amqp().await.unwrap();
    let channel = connection.open_channel().await.unwrap();
    let confirm = channel
        .publish(Publication::new(
            "",
            &dlq,
            b"{}",
            BasicProperties::default()
                .with_message_id("deep".into())
                .with_headers(flat),
        ))
        .await
        .unwrap();
    assert_eq!(confirm, Confirm::Ack);

    let peek = cli(&["dlq", "peek", "--queue", q, "--json"]);
    assert!(peek.status.success(), "{peek:?}");
    let report: serde_json::Value = serde_json::from_slice(&peek.stdout).unwrap();
    let deep = &report["matched"][1];
    assert_eq!(deep["message_id"], "deep");
    let note = deep["headers"]["deep"].as_str().unwrap();
    assert!(
        note.contains("not shown: nests 17999 levels deep"),
        "{note}"
    );

    let file = std::env::temp_dir().join(unique("deep-export"));
    let export = cli(&[
        "dlq",
        "export",
        "--queue",
        q,
        "--jsonl",
        file.to_str().unwrap(),
    ]);
    assert!(stdout(&export).contains("exported 1"), "{export:?}");
    let errors = String::from_utf8_lossy(&export.stderr);
    assert!(
        errors.contains("not exported: message 1 (deep): its headers nest 18000 levels deep"),
        "{errors}"
    );
    let _ = std::fs::remove_file(&file);
    let replay = cli(&["dlq", "replay", "--queue", q]);
    assert!(stdout(&replay).contains("replayed 1, 1 left"), "{replay:?}");

    // What is left is the deep message, its headers as they were sent.
    let got = channel.get(&dlq).await.unwrap().expect("the deep message");
    let Some(AMQPValue::ByteArray(packed)) = got
        .properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(DEEP_HEADERS))
    else {
        panic!("the connection hands the deep headers over packed");
    };
    let original = unpack(packed.as_slice()).unwrap();
    assert!(original.entries == entries, "the headers are intact");
    got.acker.ack().await.unwrap();
    connection.close().await;
}

/// Declares the dead-letter index of a fixture (two streams, the entries
/// bound to `<queue>.dlx` with the DLQ's key, as the framework declares
/// them); deletes them and the exchange when dropped.
struct Index {
    queue: String,
}

impl Index {
    async fn declare(f: &Fixture) -> Index {
        // The dead-letter exchange and the DLQ's binding first.
        two_kinds(f, 0).await;
        let connection = connect(&url()).await;
        let channel = connection.create_channel().await.unwrap();
        let dlq = format!("{}.dlq", f.queue);
        let mut stream = FieldTable::default();
        stream.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("stream".into()),
        );
        for name in [format!("{dlq}.index"), format!("{dlq}.index.removed")] {
            channel
                .queue_declare(
                    name.as_str().into(),
                    QueueDeclareOptions {
                        durable: true,
                        ..Default::default()
                    },
                    stream.clone(),
                )
                .await
                .unwrap();
        }
        channel
            .queue_bind(
                format!("{dlq}.index").as_str().into(),
                format!("{}.dlx", f.queue).as_str().into(),
                dlq.as_str().into(),
                Default::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
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

#[tokio::test]
async fn purge_asks_for_yes_and_leaves_the_index_answering_groups() {
    let f = Fixture::new("purge", 0).await;
    let _index = Index::declare(&f).await;
    two_kinds(&f, 10).await;
    let q = f.queue.as_str();

    let refused = cli(&["dlq", "purge", "--queue", q]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--yes"),
        "{refused:?}"
    );
    let groups = json(&cli(&["dlq", "groups", "--queue", q, "--json"]));
    assert_eq!(
        groups.as_array().unwrap().len(),
        2,
        "nothing purged: {groups}"
    );
    assert_eq!(groups[0]["source"], "index");
    assert_eq!(groups[0]["source_reason"], "from the index");

    let purged = json(&cli(&["dlq", "purge", "--queue", q, "--yes", "--json"]));
    assert_eq!(purged["purged"], 10, "{purged}");
    assert_eq!(purged["checkpoint"]["kind"], "written", "{purged}");

    // New dead letters after the purge: the index answers, from the
    // purge's empty checkpoint, with no pass in between.
    two_kinds(&f, 4).await;
    let groups = json(&cli(&["dlq", "groups", "--queue", q, "--json"]));
    let groups = groups.as_array().unwrap();
    assert_eq!(groups.len(), 2, "{groups:?}");
    for group in groups {
        assert_eq!(group["count"], 2);
        assert_eq!(group["source"], "index", "{group}");
        assert!(
            group["source_reason"]
                .as_str()
                .unwrap()
                .starts_with("from the index; starting from the checkpoint at offset"),
            "{group}"
        );
    }
    let text = stdout(&cli(&["dlq", "purge", "--queue", q, "--yes"]));
    assert!(text.contains("purged 4 (checkpoint written"), "{text}");
}

/// `dlq groups` reads the index over the stream protocol at
/// `--stream-port`, whose default is `RABBITMQ_STREAM_PORT` (the test
/// broker's), and over AMQP where nothing answers or with 0, with the same
/// groups; `index_protocol` says which.
#[tokio::test]
async fn groups_read_the_index_at_the_stream_port_it_is_given() {
    let f = Fixture::new("stream-port", 0).await;
    let _index = Index::declare(&f).await;
    // Plain dead letters (message 0, with every AMQP type, may be read over
    // AMQP on its own: docs/dead-letters.md).
    two_kinds_in(&f, 1..11).await;
    let q = f.queue.as_str();
    let groups_with = |args: &[&str], port: Option<&str>| {
        let args = [&["dlq", "groups", "--queue", q, "--json"][..], args].concat();
        let env: Vec<_> = port
            .map(|p| ("RABBITMQ_STREAM_PORT", p))
            .into_iter()
            .collect();
        json(&cli_with(&args, &env))
    };
    let protocols = |groups: &serde_json::Value| -> Vec<String> {
        groups
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                assert_eq!(g["source"], "index", "{g}");
                g["index_protocol"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let without = |mut groups: serde_json::Value| {
        for group in groups.as_array_mut().unwrap() {
            group.as_object_mut().unwrap().remove("index_protocol");
        }
        groups
    };

    let over_stream = groups_with(&[], None);
    assert_eq!(
        protocols(&over_stream),
        ["stream", "stream"],
        "{over_stream}"
    );
    assert_eq!(
        over_stream
            .as_array()
            .unwrap()
            .iter()
            .map(|g| &g["count"])
            .collect::<Vec<_>>(),
        [5, 5]
    );
    for (args, port) in [
        (&["--stream-port", "0"][..], None),
        // Nothing listens on port 1.
        (&[], Some("1")),
        (&["--stream-port", "1"], None),
    ] {
        let over_amqp = groups_with(args, port);
        assert_eq!(protocols(&over_amqp), ["amqp", "amqp"], "{args:?} {port:?}");
        assert_eq!(without(over_amqp), without(over_stream.clone()));
    }
}

/// The test broker's version as (major, minor), from its `rabbitmqctl`.
fn broker_version() -> (u32, u32) {
    let output = ctl()
        .args(["-q", "status", "--formatter", "json"])
        .output()
        .expect("rabbitmqctl");
    assert!(output.status.success(), "rabbitmqctl status: {output:?}");
    let status: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let version = status["rabbitmq_version"].as_str().expect("a version");
    let mut parts = version.split('.').map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// `status --retry delayed` looks for no retry tier, finds the work queue's
/// arguments as declared, and shows the messages the work queue holds back;
/// `status` without a queue finds the consumer by its shape and shows them
/// (counted by the management API on RabbitMQ 4.3; AMQP counts them neither
/// ready nor unacknowledged). Before 4.3 the queue ignores the arguments and
/// holds nothing back.
#[tokio::test]
async fn status_shows_what_delayed_retries_hold_back() {
    use rabbit_backoff::topology::Topology;
    use rabbit_backoff::{ConsumerSpec, QueueType, RetryBackend};

    let queue = unique("held");
    let mut spec = ConsumerSpec::new(queue.clone(), "30s".parse().unwrap());
    spec.queue_type = Some(QueueType::Quorum);
    spec.retry = RetryBackend::Delayed;
    let topology = Topology::of(&spec);
    let framework = rabbit_backoff::connect(&url()).await.expect("connect");
    rabbit_backoff::topology::declare_topology(&*framework, &topology)
        .await
        .expect("declare");
    framework.close().await;
    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    let _cleanup = rabbit_backoff_test_support::cleanup::Cleanup::of(&spec);
    channel
        .basic_publish(
            "".into(),
            queue.as_str().into(),
            BasicPublishOptions::default(),
            b"{}",
            BasicProperties::default(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let got = loop {
        if let Some(got) = channel
            .basic_get(queue.as_str().into(), Default::default())
            .await
            .unwrap()
        {
            break got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    got.acker
        .reject(lapin::options::BasicRejectOptions { requeue: true })
        .await
        .unwrap();
    let held = if broker_version() >= (4, 3) { 1 } else { 0 };
    // The management API samples queues every few seconds: ask until it
    // counts the message where it is.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let doc = loop {
        let output = cli(&[
            "status",
            "--queue",
            &queue,
            "--delays",
            "30s",
            "--queue-type",
            "quorum",
            "--retry",
            "delayed",
            "--json",
        ]);
        assert!(output.status.success(), "{output:?}");
        let doc: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
        if doc["held_back"][0]["messages"] == serde_json::json!(held)
            || std::time::Instant::now() > deadline
        {
            break doc;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert_eq!(
        doc["held_back"],
        serde_json::json!([{ "queue": queue, "messages": held }]),
        "{doc}"
    );
    let roles: Vec<&str> = doc["consumers"][0]["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["work", "dead-letter"], "no retry tier: {doc}");
    assert_eq!(doc["argument_differences"], serde_json::json!([]), "{doc}");
    // Found by its shape too, with no retry queue: the delayed retry
    // arguments make it a consumer's.
    let output = cli(&["status", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let found = doc["consumers"]
        .as_array()
        .expect("consumers")
        .iter()
        .find(|c| c["queue"] == serde_json::json!(queue))
        .unwrap_or_else(|| panic!("{queue} not found: {doc}"));
    assert_eq!(found["tiers"], serde_json::json!([]), "{found}");
    assert_eq!(found["held_back"], serde_json::json!(held), "{found}");
    let _ = connection.close(200, "".into()).await;
}
