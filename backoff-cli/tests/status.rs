//! `rabbit-backoff status` against the real broker: the depths of a consumer's
//! tiers and a threshold, arguments that differ from the spec, every consumer
//! topology found through the management API, what delayed retries hold back.

mod common;

use lapin::BasicProperties;
use lapin::options::QueueDeleteOptions;
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff_test_support::broker::url;
use rabbit_backoff_test_support::declare::{arguments, text};

use common::*;

#[tokio::test]
async fn status_reports_tiers_and_fails_above_a_threshold() {
    let f = Fixture::new("status", 3).await;
    let old_tier = format!("{}.retry_7ms", f.queue);
    {
        let connection = connect(&url()).await;
        let channel = connection.create_channel().await.unwrap();
        declare::queue(&channel, &old_tier, FieldTable::default()).await;
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

    let fail_above = |threshold: &str| {
        cli(&[
            "status",
            "--queue",
            &f.queue,
            "--delays",
            f.delays,
            "--fail-above",
            threshold,
        ])
    };
    let ok = fail_above("3");
    assert_eq!(ok.status.code(), Some(0));
    let over = fail_above("2");
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
async fn status_follows_retry_return_and_names_arguments_that_differ() {
    // A retry tier declared the framework's way (back through the default
    // exchange), operated as the article's topology (through the work exchange).
    let queue = unique("route");
    let tier = format!("{queue}.retry_1000ms");
    let connection = connect(&url()).await;
    let channel = connection.create_channel().await.unwrap();
    declare::queue(
        &channel,
        &tier,
        arguments(&[
            ("x-message-ttl", AMQPValue::LongInt(1000)),
            ("x-dead-letter-exchange", text("")),
            ("x-dead-letter-routing-key", text(&queue)),
        ]),
    )
    .await;
    let status_with = |more: &[&str]| {
        let mut args = vec![
            "status",
            "--queue",
            &queue,
            // Declared as the article declares it: classic.
            "--queue-type",
            "classic",
            "--delays",
            "1s",
        ];
        args.extend_from_slice(more);
        cli(&args)
    };
    let status = |route: &str| {
        status_with(&[
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
    let table = status_with(&["--retry-return", "exchange"]);
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

/// Declares a consumer topology by hand, as an operator or another tool
/// would: `retry` TTLs, dead-letter exchange and queue named freely.
async fn hand_declared(
    channel: &lapin::Channel,
    work: &str,
    dlx: &str,
    dlq: &str,
    retries: &[(&str, i64)],
) {
    declare::exchange(channel, dlx, lapin::ExchangeKind::Direct).await;
    declare::queue(
        channel,
        work,
        arguments(&[
            ("x-dead-letter-exchange", text(dlx)),
            ("x-dead-letter-routing-key", text(dlq)),
        ]),
    )
    .await;
    declare::queue(channel, dlq, FieldTable::default()).await;
    declare::bind(channel, dlq, dlx, dlq).await;
    for (name, ttl) in retries {
        declare::queue(
            channel,
            name,
            arguments(&[
                ("x-message-ttl", AMQPValue::LongLongInt(*ttl)),
                ("x-dead-letter-exchange", text("")),
                ("x-dead-letter-routing-key", text(work)),
            ]),
        )
        .await;
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
        publish(
            &channel,
            "",
            &b_dlq,
            format!("{i}").as_bytes(),
            BasicProperties::default(),
        )
        .await;
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
    publish(&channel, "", &queue, b"{}", BasicProperties::default()).await;
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
