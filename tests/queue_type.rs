//! The queue type of a consumer that names none, on one node: classic queues
//! declared as such whatever the virtual host's `default_queue_type`, and
//! the start-up warning about classic queues on a cluster, which a single
//! address does not raise and a list of several does.

mod common;

use std::time::Duration;

use common::*;
use rabbit_backoff::prelude::*;
use rabbit_backoff_test_support::log_capture::LogCapture;

/// What the warning says, whatever the queue.
const RISK: &str = "a classic queue lives on one node";

/// Starts the test consumer on `queue` at `uri`, its queue type unnamed, and
/// stops it once it consumes.
async fn start_and_stop(uri: &str, queue: &str) {
    let queue = queue.to_owned();
    let running = Runtime::builder()
        .uri(uri)
        .state(Journal::default())
        .handle_signals(false)
        .shutdown_grace(Duration::from_secs(5))
        .consumer_with(process_job, move |spec| spec.queue = queue)
        .start()
        .await
        .expect("the consumer starts");
    running.stop().await.expect("the consumer stops");
}

#[tokio::test]
async fn one_address_raises_no_cluster_warning_and_several_do() {
    let queue = unique("queue-type-one-node");
    let spec = {
        let mut spec = process_job.spec();
        spec.queue = queue.clone();
        spec
    };
    assert_eq!(spec.queue_type, None, "the test consumer names no type");
    let _cleanup = Cleanup::of(&spec);
    let log = LogCapture::start("warn");

    start_and_stop(&url(), &queue).await;
    assert_eq!(log.warnings_with(RISK), Vec::<String>::new());

    // The same node, and an address where nothing listens: two nodes listed,
    // which is what the runtime takes for a cluster.
    let nowhere = "amqp://guest:guest@127.0.0.1:1/%2f";
    start_and_stop(&format!("{},{nowhere}", url()), &queue).await;
    let warnings = log.warnings_with(RISK);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    for words in [queue.as_str(), "queue_type = \"quorum\"", "2 nodes"] {
        assert!(warnings[0].contains(words), "{words}: {}", warnings[0]);
    }
}

#[tokio::test]
async fn a_consumer_naming_no_type_declares_classic_queues_on_a_vhost_defaulting_to_quorum() {
    let vhost = unique("queue-type-vhost");
    run_rabbitmqctl(&["add_vhost", &vhost, "--default-queue-type", "quorum"]);
    let _vhost = DeleteVhost(vhost.clone());
    run_rabbitmqctl(&["set_permissions", "-p", &vhost, "guest", ".*", ".*", ".*"]);
    let base = url();
    let (root, _) = base.rsplit_once('/').expect("an address with a vhost");
    let uri = format!("{root}/{vhost}");

    let queue = unique("queue-type-default");
    start_and_stop(&uri, &queue).await;

    let output = rabbitmqctl()
        .args(["-q", "list_queues", "-p", &vhost, "name", "type"])
        .args(["--formatter", "json"])
        .output()
        .expect("rabbitmqctl runs");
    let listed: Vec<serde_json::Value> =
        serde_json::from_slice(&output.stdout).expect("rabbitmqctl lists queues as JSON");
    let types: Vec<(String, String)> = listed
        .iter()
        .map(|q| (q["name"].to_string(), q["type"].to_string()))
        // The dead-letter index is a stream, of its own type.
        .filter(|(name, kind)| name.contains(&queue) && !kind.contains("stream"))
        .collect();
    assert!(
        types.len() >= 3,
        "the work, retry and dead-letter queues: {types:?}"
    );
    assert!(
        types.iter().all(|(_, kind)| kind.contains("classic")),
        "a vhost's default type does not change the consumer's: {types:?}"
    );
}

/// Deletes a virtual host, and every queue and exchange in it, when dropped.
struct DeleteVhost(String);

impl Drop for DeleteVhost {
    fn drop(&mut self) {
        let _ = rabbitmqctl().args(["delete_vhost", &self.0]).output();
    }
}
