//! `rabbit-backoff dlq groups` against the real broker, with what it leads
//! to (replay and discard of a group, export and import) and the dead-letter
//! index it reads: a purge that leaves the index answering, the stream port.

mod common;

use rabbit_backoff_test_support::broker::url;

use common::*;

#[tokio::test]
async fn groups_group_replay_and_discard_and_a_lossless_export_import() {
    let f = Fixture::new("groups", 0).await;
    two_kinds(&f, 10).await;
    let q = f.queue.as_str();

    let groups = json(&dlq_classic("groups", q, &["--json"]));
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
    let again = json(&dlq_classic("groups", q, &["--json"]));
    assert_eq!(again.as_array().unwrap(), groups);
    let table = stdout(&dlq_classic("groups", q, &[]));
    assert!(table.contains("10 dead letters in 2 groups"), "{table}");
    assert!(
        table.contains("read with a pass over the queue: there is no index beside the queue"),
        "{table}"
    );

    // Export everything, and one group.
    let dir = std::env::temp_dir().join(unique("export"));
    std::fs::create_dir_all(&dir).unwrap();
    let all = dir.join("all.jsonl");
    let exported = dlq_classic("export", q, &["--jsonl", all.to_str().unwrap()]);
    assert!(stdout(&exported).contains("exported 10"), "{exported:?}");
    let one_group = dir.join("group.jsonl");
    let id = missing["id"].as_str().unwrap();
    dlq_classic(
        "export",
        q,
        &["--group", id, "--jsonl", one_group.to_str().unwrap()],
    );
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
    let discarded = dlq_classic("discard", q, &["--yes"]);
    assert!(
        stdout(&discarded).contains("discarded 10, 0 left"),
        "{discarded:?}"
    );
    let imported = dlq_classic("import", q, &["--jsonl", all.to_str().unwrap()]);
    assert!(stdout(&imported).contains("imported 10"), "{imported:?}");
    let round_trip = dir.join("again.jsonl");
    dlq_classic("export", q, &["--jsonl", round_trip.to_str().unwrap()]);
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
    let refused = dlq_classic("import", q, &["--jsonl", bad.to_str().unwrap()]);
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        why.contains("bad.jsonl:2") && why.contains("base64"),
        "{why}"
    );
    let peek = json(&cli(&["dlq", "peek", "--queue", q, "--json"]));
    assert_eq!(peek["kept"], 10, "nothing of the bad file was imported");

    // Replay one group; discard the other.
    let replayed = json(&dlq_classic(
        "replay",
        q,
        &["--group", timeouts["id"].as_str().unwrap(), "--json"],
    ));
    let ids: Vec<&str> = replayed["matched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m-1", "m-3", "m-5", "m-7", "m-9"]);
    assert_eq!(replayed["kept"], 5);
    let left = json(&dlq_classic("groups", q, &["--json"]));
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
    let refused = dlq_classic("import", q, &["--jsonl", all.to_str().unwrap()]);
    assert!(!refused.status.success(), "{refused:?}");
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains(&format!("'{q}.dlx'")), "{why}");
    let peek = json(&cli(&["dlq", "peek", "--queue", q, "--json"]));
    assert_eq!(peek["kept"], 0, "nothing was imported");
    std::fs::remove_dir_all(&dir).unwrap();
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
