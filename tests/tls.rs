//! `amqps://` end to end: a consumer, a publisher and the framework's own
//! connection over TLS, and the refusals a user meets (a certificate of
//! another CA, a host the certificate does not name, a file that cannot be
//! read), with what their errors say.
//!
//! Needs the TLS node of `scripts/tls.sh up` (TLS on 127.0.0.1:5671 and
//! 127.0.0.2:5671, plain AMQP on 127.0.0.1:5676, certificates in
//! `RABBIT_BACKOFF_TLS_DIR`, by default /tmp/rabbit-backoff-tls) and is built
//! only with the feature `tls`: `cargo test --features tls --test tls`
//! (`scripts/test.sh` starts the node, runs this, and stops it).

mod common;

use std::time::Duration;

use common::*;
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::Topology;
use rabbit_backoff::{HealthWatch, QueueType, RetryBackend, ShutdownHandle};
use rabbit_backoff_test_support::tls::{PLAIN, amqps, cert};
use tokio::time::Instant;

/// Why connecting to `uri` fails, as the user reads it.
async fn refusal(uri: &str) -> String {
    match rabbit_backoff::connect(uri).await {
        Err(e) => e.to_string(),
        Ok(connection) => {
            connection.close().await;
            panic!("{uri} connected")
        }
    }
}

/// A runtime over `uri` with one consumer of `process_job` on `journal`,
/// its spec set by `configure`, and that spec.
fn consumer_over(
    uri: &str,
    journal: &Journal,
    configure: impl FnOnce(&mut ConsumerSpec) + Send + 'static,
) -> (Runtime, ConsumerSpec) {
    let runtime = Runtime::builder()
        .uri(uri.to_owned())
        .state(journal.clone())
        .handle_signals(false)
        .shutdown_grace(Duration::from_secs(5))
        .consumer_with(process_job, configure)
        .build()
        .expect("a valid runtime");
    let spec = runtime.specs().next().cloned().expect("one consumer");
    (runtime, spec)
}

/// Publishes job `id` (failing once) to `spec`'s queue over `uri` and waits
/// up to 20 s until it is handled on its retry, after exactly one failure;
/// returns when it was published.
async fn handled_on_its_retry(
    uri: &str,
    spec: &ConsumerSpec,
    journal: &Journal,
    id: u64,
) -> Instant {
    let publisher = Publisher::connect(uri)
        .await
        .expect("a publisher connects over amqps://");
    let published = Instant::now();
    publisher
        .publish_to(spec, &Job::new(id, Fail::Transient, Some(1)))
        .await
        .expect("publish over amqps://");
    eventually(
        &format!("job {id} handled on its retry"),
        Duration::from_secs(20),
        || journal.reached(id, 1),
    )
    .await;
    let calls = journal.calls_for(id);
    assert_eq!(
        calls.iter().map(|s| s.retry_count).collect::<Vec<_>>(),
        [0, 1]
    );
    publisher.close().await;
    published
}

/// `runtime` running, once ready over `uri` within 20 s: its task, its
/// shutdown handle and its health.
async fn started_over_amqps(
    runtime: Runtime,
    uri: &str,
) -> (
    tokio::task::JoinHandle<Result<(), rabbit_backoff::Error>>,
    ShutdownHandle,
    HealthWatch,
) {
    let shutdown = runtime.shutdown_handle();
    let health = runtime.health();
    let task = tokio::spawn(runtime.run());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !health.is_ready() {
        assert!(
            !task.is_finished(),
            "the runtime stopped while connecting to {uri}"
        );
        assert!(
            Instant::now() < deadline,
            "the consumer did not start over amqps:// within 20 s: {:?}",
            health.current()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (task, shutdown, health)
}

/// Stops the runtime of `task` (within 15 s, without error) and checks,
/// over the node's plain listener, that `spec`'s work queue and dead-letter
/// queue are empty: every message acked, none dead-lettered.
async fn stopped_with_nothing_left(
    task: tokio::task::JoinHandle<Result<(), rabbit_backoff::Error>>,
    shutdown: ShutdownHandle,
    spec: &ConsumerSpec,
) {
    shutdown.shutdown();
    tokio::time::timeout(Duration::from_secs(15), task)
        .await
        .expect("the runtime stops within 15 s")
        .expect("the runtime task does not panic")
        .expect("the runtime ends without error");
    let connection = lapin::Connection::connect(PLAIN, lapin::ConnectionProperties::default())
        .await
        .expect("the TLS node's plain listener (scripts/tls.sh up)");
    let channel = connection.create_channel().await.expect("channel");
    let names = spec.names();
    assert_eq!(depth(&channel, &names.queue).await, 0);
    assert_eq!(depth(&channel, &names.dead_letter_queue).await, 0);
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn a_consumer_handles_a_message_over_amqps() {
    let uri = amqps("localhost", "ca.pem");
    let queue = unique("tls");
    let journal = Journal::default();
    let (runtime, spec) = consumer_over(&uri, &journal, move |spec| spec.queue = queue);
    let _cleanup = Cleanup::of(&spec).at(PLAIN);
    let (task, shutdown, health) = started_over_amqps(runtime, &uri).await;
    let node = health.node().expect("connected to a node");
    assert!(
        node.starts_with("amqps://") && node.contains(":5671"),
        "{node}"
    );

    // Published over TLS; failing once, the message goes through its retry
    // tier (a republish confirmed over TLS) and comes back.
    handled_on_its_retry(&uri, &spec, &journal, 7).await;

    stopped_with_nothing_left(task, shutdown, &spec).await;
}

/// `retry = "scheduled"` over amqps://: on RabbitMQ 4.3 the consumer's
/// AMQP 1.0 connection runs over TLS as its 0-9-1 one does, and a failed
/// message is held back by its queue and handled on its retry; before 4.3
/// the consumer refuses to start. The node's version is `RABBITMQ_VERSION`,
/// as given to `scripts/tls.sh up` (3.10 by default, as there).
#[tokio::test]
async fn a_scheduled_consumer_retries_over_amqps() {
    let version = std::env::var("RABBITMQ_VERSION").unwrap_or_else(|_| "3.10".into());
    let uri = amqps("localhost", "ca.pem");
    let queue = unique("tls-scheduled");
    let journal = Journal::default();
    let (runtime, spec) = consumer_over(&uri, &journal, move |spec| {
        spec.queue = queue;
        spec.queue_type = Some(QueueType::Quorum);
        spec.retry = RetryBackend::Scheduled;
        spec.delays = "300ms".parse().expect("a schedule");
    });
    let _cleanup = Cleanup::of(&spec).at(PLAIN);
    if !version.starts_with("4.3") {
        let started = tokio::time::timeout(Duration::from_secs(20), runtime.run())
            .await
            .expect("the refusal comes within 20 s");
        assert_scheduled_refused(started);
        return;
    }
    let (task, shutdown, _) = started_over_amqps(runtime, &uri).await;

    let published = handled_on_its_retry(&uri, &spec, &journal, 11).await;
    assert!(
        published.elapsed() >= Duration::from_millis(300),
        "the retry came back before its 300 ms"
    );
    stopped_with_nothing_left(task, shutdown, &spec).await;
}

#[tokio::test]
async fn the_framework_connection_declares_and_checks_over_amqps() {
    let connection = rabbit_backoff::connect(&amqps("127.0.0.1", "ca.pem"))
        .await
        .expect("connects over amqps:// to an IP address the certificate names");
    let mut spec = process_job.spec();
    spec.queue = unique("tls.declare");
    let _cleanup = Cleanup::of(&spec).at(PLAIN);
    rabbit_backoff::topology::declare_topology(&*connection, &Topology::of(&spec))
        .await
        .expect("declare the topology over amqps://");
    let channel = connection.open_channel().await.expect("a channel");
    let work = channel
        .check_queue(&spec.queue)
        .await
        .expect("the work queue exists");
    assert_eq!((work.messages, work.consumers), (0, 0));
    connection.close().await;
}

#[tokio::test]
async fn a_server_certificate_of_another_ca_is_refused() {
    let error = refusal(&amqps("localhost", "other-ca.pem")).await;
    assert!(
        error.contains(&format!(
            "the server's certificate is not signed by a CA this client trusts (it trusts only cacertfile={}); pass cacertfile=<the CA certificate (PEM) that signed the broker's certificate>",
            cert("other-ca.pem").display()
        )),
        "{error}"
    );

    // Without cacertfile: the system's roots, which do not hold the test CA.
    let error = refusal("amqps://guest:guest@localhost:5671/%2f").await;
    assert!(
        error.contains(
            "the server's certificate is not signed by a CA this client trusts (it trusts the system's root certificates); pass cacertfile="
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_host_the_certificate_does_not_name_is_refused() {
    // The node's TLS listener on another loopback address, which its
    // certificate (localhost, 127.0.0.1) does not name.
    let error = refusal(&amqps("127.0.0.2", "ca.pem")).await;
    assert!(
        error.contains(
            "the server's certificate is not valid for 127.0.0.2: it is for localhost, 127.0.0.1; connect with a name the certificate holds, or pass server_name_indication=<a name it holds>"
        ),
        "{error}"
    );

    // server_name_indication says which name to check instead.
    let connection = rabbit_backoff::connect(&format!(
        "{}&server_name_indication=localhost",
        amqps("127.0.0.2", "ca.pem")
    ))
    .await
    .expect("checked against localhost");
    connection.close().await;
}

#[tokio::test]
async fn unusable_tls_parameters_are_named() {
    let error =
        refusal("amqps://guest:guest@localhost:5671/%2f?cacertfile=/nonexistent/ca.pem").await;
    assert!(
        error.contains("cacertfile=/nonexistent/ca.pem: cannot be read: "),
        "{error}"
    );
    let error = refusal(&format!(
        "amqp://guest:guest@127.0.0.1:5676/%2f?cacertfile={}",
        cert("ca.pem").display()
    ))
    .await;
    assert!(
        error.contains("a TLS parameter on an amqp:// URI, which is not encrypted; use amqps://"),
        "{error}"
    );
    let error = refusal("amqps://guest:guest@localhost:5671/%2f?verify=yes").await;
    assert!(
        error.contains("verify=yes: expected verify_peer"),
        "{error}"
    );
}
