//! Several broker addresses: the runtime and the publisher connect to the
//! first node that answers, and say which.

mod common;

use std::time::{Duration, Instant};

use common::proxy::Proxy;
use common::stores::closed_port;
use common::*;
use rabbit_backoff::prelude::*;

#[tokio::test]
async fn the_first_node_that_answers_is_used_and_named() {
    // Port 1 refuses at once: a node that is down.
    let down = "amqp://guest:guest@127.0.0.1:1/%2f";
    let queue = unique("failover");
    let journal = Journal::default();
    let running = Runtime::builder()
        .uris([down.to_owned(), url()])
        .state(journal.clone())
        .handle_signals(false)
        .consumer_with(process_job, |spec| spec.queue = queue.clone())
        .start()
        .await
        .expect("starts on the second node");
    let mut spec = process_job.spec();
    spec.queue = queue.clone();
    let _cleanup = Cleanup::of(&spec);
    let node = running.health().node().expect("a node");
    assert!(
        node.contains("127.0.0.1:5672") || node == redacted(&url()),
        "{node}"
    );
    assert!(!node.contains(":1/"), "not the node that is down: {node}");

    // AMQP_URL-style lists work for the publisher too.
    let publisher = Publisher::connect(&format!("{down},{}", url()))
        .await
        .expect("connects");
    publisher
        .publish_to(&spec, &Job::new(1, Fail::None, None))
        .await
        .expect("published through the second node");
    eventually("handled", std::time::Duration::from_secs(10), || {
        journal.reached(1, 0)
    })
    .await;
    publisher.close().await;
    running.stop().await.unwrap();
}

/// Two nodes, both down long enough for the reconnect backoff to have grown
/// to seconds; one comes back (a proxy to the broker starts listening on its
/// port), the other stays down. The runtime is consuming within a second,
/// on the node that came back: it probes every node between attempts.
#[tokio::test]
async fn a_node_that_comes_back_is_connected_to_within_a_second() {
    let down = "amqp://guest:guest@127.0.0.1:1/%2f";
    let port = closed_port();
    let returning = format!("amqp://guest:guest@127.0.0.1:{port}/%2f");
    let queue = unique("return");
    let journal = Journal::default();
    let runtime = Runtime::builder()
        .uris([down.to_owned(), returning.clone()])
        .state(journal.clone())
        .handle_signals(false)
        // 1 s, 2 s, 4 s, 8 s…: after 4 s down the next attempt is seconds away.
        .reconnect_backoff(Duration::from_secs(1), Duration::from_secs(30))
        .consumer_with(process_job, |spec| spec.queue = queue.clone())
        .build()
        .expect("a valid runtime");
    let spec = runtime.specs().next().cloned().expect("one consumer");
    let _cleanup = Cleanup::of(&spec);
    let health = runtime.health();
    let shutdown = runtime.shutdown_handle();
    let task = tokio::spawn(runtime.run());
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        health.reconnects() >= 2,
        "both nodes refused, more than once"
    );

    let _proxy = Proxy::start_at(&url(), port).await;
    let back = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), health.wait_ready())
        .await
        .expect("ready within 10 s")
        .expect("ready");
    let ready_after = back.elapsed();
    println!("a node that came back: consuming {ready_after:?} after it accepted connections");
    assert!(
        ready_after < Duration::from_secs(1),
        "consuming only {ready_after:?} after the node came back"
    );
    let node = health.node().expect("a node");
    assert!(node.contains(&format!(":{port}/")), "{node}");
    shutdown.shutdown();
    task.await
        .expect("the runtime does not panic")
        .expect("the runtime stops cleanly");
}

/// The address as the framework shows it: without its password.
fn redacted(uri: &str) -> String {
    match uri
        .split_once("://")
        .and_then(|(s, rest)| Some((s, rest.split_once('@')?)))
    {
        Some((scheme, (userinfo, host))) => {
            format!(
                "{scheme}://{}:***@{host}",
                userinfo.split(':').next().unwrap_or("")
            )
        }
        None => uri.to_owned(),
    }
}

#[tokio::test]
async fn a_node_left_for_its_lost_majority_is_tried_after_the_others() {
    use rabbit_backoff::transport::{AmqpTransport, Transport};
    // Two addresses of the one broker, each through a proxy of its own.
    let (a, b) = (Proxy::start(&url()).await, Proxy::start(&url()).await);
    let transport = AmqpTransport::with_nodes([a.url().to_owned(), b.url().to_owned()]);
    let on_a = transport.connect().await.expect("connects");
    assert_eq!(on_a.node(), redacted(a.url()));
    // A healthy node answers the metadata watch's probe at once.
    let channel = on_a.open_channel().await.expect("a channel");
    let started = Instant::now();
    channel
        .probe_metadata()
        .await
        .expect("the probe is answered");
    assert!(started.elapsed() < Duration::from_secs(1));

    on_a.leave("a test leaves it").await;
    let lost = on_a.lost();
    assert_eq!(lost.reason().as_deref(), Some("a test leaves it"));
    assert!(
        channel.probe_metadata().await.is_err(),
        "lost: fails at once"
    );

    let on_b = transport.connect().await.expect("connects again");
    assert_eq!(
        on_b.node(),
        redacted(b.url()),
        "the node left is tried last"
    );
    on_b.close().await;
    // Connected to b, a is still tried after it; once b is left too, both
    // are tried in turn, from the one after b.
    let again = transport.connect().await.expect("connects again");
    assert_eq!(again.node(), redacted(b.url()));
    again.leave("b left too").await;
    let last = transport.connect().await.expect("connects again");
    assert_eq!(last.node(), redacted(a.url()));
    last.close().await;
}
