//! Declaring the topology: its exact shape, adopting an existing one,
//! conflicts, isolation on shared exchanges.

mod common;

use std::time::Duration;

use common::*;
use lapin::options::{ExchangeDeclareOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::Topology;
use rabbit_backoff::{Error, ExchangeKind};
use rabbit_backoff_test_support::declare::{arguments, text};

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test]
async fn a_retried_message_returns_only_to_its_own_queue_on_a_shared_fanout_exchange() {
    let shared = unique("fanout");
    let other = unique("bystander");
    let (connection, channel) = channel().await;
    let cleanup = Cleanup::default().queue(&other).exchange(&shared);
    let running = Running::start("fanout", |spec| {
        spec.names.exchange = Some(shared.clone());
        spec.exchange_kind = ExchangeKind::Fanout;
    })
    .await;
    declare::queue(&channel, &other, FieldTable::default()).await;
    declare::bind(&channel, &other, &shared, "").await;

    let publisher = publisher().await;
    publisher
        .publish(
            &shared,
            "anything",
            rabbit_backoff::Outgoing::json(&Job::new(1, Fail::Transient, Some(2))).unwrap(),
        )
        .await
        .unwrap();
    eventually("three attempts", WAIT, || {
        running.journal.calls_for(1).len() == 3
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        depth(&channel, &other).await,
        1,
        "the bystander got the original only, no retried copy"
    );
    running.stop().await;
    drop(cleanup);
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn an_existing_topology_declared_by_another_client_is_adopted() {
    // The seed's topology, declared first by a plain AMQP client, with its own
    // integer widths for x-message-ttl.
    let p = unique("seed");
    let work_exchange = format!("{p}.work_exchange");
    let work_queue = format!("{p}.work_queue");
    let retry_exchange = format!("{p}.retry_exchange");
    let dlx = format!("{p}.dlx_exchange");
    let dlq = format!("{p}.dead_letter_queue");
    let retry = |ms: u32| format!("{p}.retry_{ms}ms");
    let delays = [100u32, 200];

    let (connection, channel) = channel().await;
    let mut cleanup = Cleanup::default()
        .exchange(&work_exchange)
        .exchange(&retry_exchange)
        .exchange(&dlx);
    cleanup = cleanup
        .queue(&work_queue)
        .queue(&dlq)
        .queue(&format!("{dlq}.index"))
        .queue(&format!("{dlq}.index.removed"));
    for ms in delays {
        cleanup = cleanup.queue(&retry(ms));
    }
    for exchange in [&work_exchange, &retry_exchange, &dlx] {
        declare::exchange(&channel, exchange, lapin::ExchangeKind::Direct).await;
    }
    declare::queue(
        &channel,
        &work_queue,
        arguments(&[
            ("x-dead-letter-exchange", text(&dlx)),
            ("x-dead-letter-routing-key", text("dead")),
        ]),
    )
    .await;
    for ms in delays {
        declare::queue(
            &channel,
            &retry(ms),
            arguments(&[
                ("x-message-ttl", AMQPValue::LongInt(ms as i32)),
                ("x-dead-letter-exchange", text("")),
                ("x-dead-letter-routing-key", text(&work_queue)),
            ]),
        )
        .await;
    }
    declare::queue(&channel, &dlq, FieldTable::default()).await;
    declare::bind(&channel, &work_queue, &work_exchange, "work").await;
    for ms in delays {
        declare::bind(&channel, &retry(ms), &retry_exchange, &retry(ms)).await;
    }
    declare::bind(&channel, &dlq, &dlx, "dead").await;

    let journal = Journal::default();
    let runtime = test_runtime(journal.clone())
        .consumer_with(process_job, |spec| {
            spec.queue = work_queue.clone();
            // The seed declared classic queues.
            spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
            spec.delays = "100ms,200ms".parse().unwrap();
            spec.names.exchange = Some(work_exchange.clone());
            spec.names.routing_key = Some("work".into());
            spec.names.retry_exchange = Some(retry_exchange.clone());
            spec.names.retry_queue = Some(format!("{p}.retry_{{ms}}ms"));
            spec.names.dead_letter_exchange = Some(dlx.clone());
            spec.names.dead_letter_queue = Some(dlq.clone());
            spec.names.dead_letter_routing_key = Some("dead".into());
        })
        .build()
        .unwrap();
    let shutdown = runtime.shutdown_handle();
    let task = tokio::spawn(runtime.run());

    let publisher = publisher().await;
    publisher
        .publish(
            &work_exchange,
            "work",
            rabbit_backoff::Outgoing::json(&Job::new(9, Fail::Transient, None)).unwrap(),
        )
        .await
        .unwrap();
    let dead = next_message(&channel, &dlq, WAIT).await;
    assert_eq!(
        header_int(&dead.delivery.properties, "x-retry-count"),
        Some(2)
    );
    assert_eq!(
        journal.calls_for(9).len(),
        3,
        "it went through both existing retry queues"
    );
    shutdown.shutdown();
    task.await
        .unwrap()
        .expect("the runtime accepted the existing topology");
    drop(cleanup);
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn a_conflicting_queue_fails_start_up_naming_the_queue_and_the_argument() {
    let queue = unique("conflict");
    let retry_queue = format!("{queue}.retry_100ms");
    let (connection, channel) = channel().await;
    let spec_for_cleanup = {
        let mut spec = process_job.spec();
        spec.queue = queue.clone();
        spec
    };
    let _cleanup = Cleanup::of(&spec_for_cleanup);
    declare::queue(
        &channel,
        &retry_queue,
        arguments(&[("x-message-ttl", AMQPValue::LongInt(999))]),
    )
    .await;

    let result = test_runtime(Journal::default())
        .consumer_with(process_job, |spec| spec.queue = queue.clone())
        .run()
        .await;
    match result {
        Err(
            ref e @ Error::TopologyConflict {
                object,
                ref name,
                ref argument,
                ..
            },
        ) => {
            assert_eq!(object, "queue");
            assert_eq!(name, &retry_queue);
            assert_eq!(argument.as_deref(), Some("x-message-ttl"));
            let message = e.to_string();
            assert!(
                message.contains(&retry_queue) && message.contains("x-message-ttl"),
                "{message}"
            );
        }
        other => panic!("expected a topology conflict, got {other:?}"),
    }
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn declaring_twice_changes_nothing_and_matches_the_model() {
    let mut spec = process_job.spec();
    spec.queue = unique("idempotent");
    let _cleanup = Cleanup::of(&spec);
    let (connection, channel) = channel().await;
    let topology = Topology::of(&spec);
    rabbit_backoff::topology::declare_topology(&*framework_connection().await, &topology)
        .await
        .unwrap();
    rabbit_backoff::topology::declare_topology(&*framework_connection().await, &topology)
        .await
        .unwrap();
    // A passive declare with the same arguments succeeds only when the queues exist.
    for queue in topology.queues() {
        depth(&channel, &queue.name).await;
    }
    // Re-declaring a retry queue with another TTL is refused: the argument is really set.
    let probe = connection.create_channel().await.unwrap();
    let refused = probe
        .queue_declare(
            topology.retry_queues[0].name.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            arguments(&[("x-message-ttl", AMQPValue::LongLongInt(1))]),
        )
        .await;
    assert!(
        refused.is_err(),
        "x-message-ttl is set on {}",
        topology.retry_queues[0].name
    );
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn start_up_refuses_missing_state_and_bad_overrides() {
    let missing = Runtime::builder().consumer(process_job).build();
    assert!(
        matches!(&missing, Err(Error::MissingState { type_name, .. }) if type_name.ends_with("Journal")),
        "{:?}",
        missing.err()
    );
    let bad = Runtime::builder()
        .state(Journal::default())
        .consumer_with(process_job, |spec| spec.queue = "amq.nope".into())
        .build();
    let message = bad.err().expect("refused").to_string();
    assert!(
        message.contains("amq.nope") && message.contains("reserves"),
        "{message}"
    );
}

#[tokio::test]
async fn an_unroutable_publish_is_an_error() {
    let publisher = publisher().await;
    let exchange = unique("nowhere");
    let (connection, channel) = channel().await;
    let _cleanup = Cleanup::default().exchange(&exchange);
    channel
        .exchange_declare(
            exchange.as_str().into(),
            lapin::ExchangeKind::Direct,
            ExchangeDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let result = publisher
        .publish(
            &exchange,
            "no-queue",
            rabbit_backoff::Outgoing::json(&1).unwrap(),
        )
        .await;
    assert!(
        matches!(
            result,
            Err(Error::Publish {
                failure: rabbit_backoff::PublishFailure::Unroutable,
                ..
            })
        ),
        "{result:?}"
    );
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn quorum_queues_retry_and_dead_letter_at_least_once() {
    let running = Running::start("quorum", |spec| {
        spec.queue_type = Some(rabbit_backoff::QueueType::Quorum)
    })
    .await;
    let (_c, channel) = channel().await;
    // Quorum queues cannot be redeclared as classic: the type really is quorum.
    let probe = _c.create_channel().await.unwrap();
    let classic = probe
        .queue_declare(
            running.spec.queue.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            arguments(&[("x-queue-type", text("classic"))]),
        )
        .await;
    assert!(classic.is_err(), "the work queue is a quorum queue");

    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(1, Fail::Transient, Some(1)))
        .await;
    running
        .publish(&publisher, &Job::new(2, Fail::Transient, None))
        .await;
    eventually("the retried job", WAIT, || {
        running.journal.calls_for(1).len() == 2
    })
    .await;
    let dead = next_message(&channel, &running.spec.names().dead_letter_queue, WAIT).await;
    assert_eq!(
        header_int(&dead.delivery.properties, "x-retry-count"),
        Some(3)
    );
    assert_eq!(running.journal.calls_for(2).len(), 4);
    running.stop().await;
}
