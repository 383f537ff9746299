//! `rabbit-backoff topology` against the real broker: the table and the
//! definitions, which import into a fresh vhost, and `--check`.

mod common;

use lapin::BasicProperties;
use lapin::options::{BasicPublishOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff_test_support::broker::url;

use common::*;

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
        declare::try_passive(&channel, q)
            .await
            .unwrap_or_else(|e| panic!("{q} was imported: {e}"));
    }
    // The imported arguments are the ones the consumer declares: a routed
    // message flows orders.retry exchange → retry queue.
    channel.confirm_select(Default::default()).await.unwrap();
    let confirm = publish_with(
        &channel,
        "orders.retry",
        "orders.retry_5000ms",
        BasicPublishOptions {
            mandatory: true,
            ..Default::default()
        },
        b"{}",
        BasicProperties::default(),
    )
    .await;
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
