//! `rabbit-backoff dlq` peek, replay and discard against the real broker, and
//! the passes under them: a pass killed midway, a dead letter nested too deep
//! to copy.

mod common;

use lapin::BasicProperties;
use lapin::options::QueueDeleteOptions;
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff_test_support::broker::url;
use std::process::Command;

use common::*;

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
    let q = declare::passive(&channel, &f.queue).await;
    assert_eq!(
        q.message_count(),
        3,
        "the replayed messages are in the work queue"
    );
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
        if declare::try_passive(&probe, &marker).await.is_ok() {
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
        let flag = declare::try_passive(&probe, &marker).await;
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
    use rabbit_backoff::transport::AmqpTransport;
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
