//! Several broker addresses: the runtime and the publisher connect to the
//! first node that answers, and say which.

mod common;

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
