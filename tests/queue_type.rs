//! The queue type of a consumer that names none: quorum queues, declared as
//! such whatever the virtual host's `default_queue_type`, with no warning on
//! a cluster; and a consumer meeting the classic queues of an existing
//! topology is refused with the line to add.

mod common;

use std::time::Duration;

use common::*;
use rabbit_backoff::prelude::*;
use rabbit_backoff::{Error, QueueType};
use rabbit_backoff_test_support::log_capture::LogCapture;

/// What the classic-on-cluster warning says, whatever the queue.
const RISK: &str = "a classic queue lives on one node";

/// Starts the test consumer on `queue` at `uri`, its queue type unnamed, and
/// stops it once it consumes.
async fn start_and_stop(uri: &str, queue: &str) {
    let queue = queue.to_owned();
    start_and_stop_with(uri, move |spec| spec.queue = queue).await;
}

/// Starts the test consumer configured by `configure` at `uri`, and stops
/// it once it consumes.
async fn start_and_stop_with(uri: &str, configure: impl FnOnce(&mut ConsumerSpec)) {
    let running = Runtime::builder()
        .uri(uri)
        .state(Journal::default())
        .handle_signals(false)
        .shutdown_grace(Duration::from_secs(5))
        .consumer_with(process_job, configure)
        .start()
        .await
        .expect("the consumer starts");
    running.stop().await.expect("the consumer stops");
}

/// The type of each queue of `vhost` whose name contains `queue`, streams
/// (the dead-letter index) left out.
fn queue_types(vhost: &str, queue: &str) -> Vec<(String, String)> {
    let output = rabbitmqctl()
        .args(["-q", "list_queues", "-p", vhost, "name", "type"])
        .args(["--formatter", "json"])
        .output()
        .expect("rabbitmqctl runs");
    let listed: Vec<serde_json::Value> =
        serde_json::from_slice(&output.stdout).expect("rabbitmqctl lists queues as JSON");
    listed
        .iter()
        .map(|q| (q["name"].to_string(), q["type"].to_string()))
        .filter(|(name, kind)| name.contains(queue) && !kind.contains("stream"))
        .collect()
}

/// A consumer that names no type declares quorum queues, and warns of
/// nothing, whether the address names one node or several.
#[tokio::test]
async fn a_consumer_naming_no_type_declares_quorum_queues_and_warns_of_nothing() {
    let queue = unique("queue-type-default");
    let spec = {
        let mut spec = process_job.spec();
        spec.queue = queue.clone();
        spec
    };
    assert_eq!(spec.queue_type, None, "the test consumer names no type");
    let _cleanup = Cleanup::of(&spec);
    let log = LogCapture::start("warn");

    start_and_stop(&url(), &queue).await;
    // The same node, and an address where nothing listens: two nodes listed,
    // which is what the runtime takes for a cluster.
    let nowhere = "amqp://guest:guest@127.0.0.1:1/%2f";
    start_and_stop(&format!("{},{nowhere}", url()), &queue).await;
    assert_eq!(log.warnings_with(RISK), Vec::<String>::new());

    let types = queue_types("/", &queue);
    assert!(
        types.len() >= 3,
        "the work, retry and dead-letter queues: {types:?}"
    );
    assert!(
        types.iter().all(|(_, kind)| kind.contains("quorum")),
        "quorum queues: {types:?}"
    );
}

/// A virtual host defaulting to classic queues does not change the type a
/// consumer declares: every queue names `x-queue-type`.
#[tokio::test]
async fn a_consumer_naming_no_type_declares_quorum_queues_on_a_vhost_defaulting_to_classic() {
    let vhost = unique("queue-type-vhost");
    run_rabbitmqctl(&["add_vhost", &vhost, "--default-queue-type", "classic"]);
    let _vhost = DeleteVhost(vhost.clone());
    run_rabbitmqctl(&["set_permissions", "-p", &vhost, "guest", ".*", ".*", ".*"]);
    let base = url();
    let (root, _) = base.rsplit_once('/').expect("an address with a vhost");
    let uri = format!("{root}/{vhost}");

    let queue = unique("queue-type-default");
    start_and_stop(&uri, &queue).await;

    let types = queue_types(&vhost, &queue);
    assert!(
        types.len() >= 3,
        "the work, retry and dead-letter queues: {types:?}"
    );
    assert!(
        types.iter().all(|(_, kind)| kind.contains("quorum")),
        "a vhost's default type does not change the consumer's: {types:?}"
    );
}

/// The classic topology of an older deployment: a consumer that names no
/// type is refused at start-up, naming the queue and the line to add; with
/// that line it adopts the classic queues.
#[tokio::test]
async fn an_existing_classic_queue_is_refused_with_the_line_to_add() {
    let queue = unique("queue-type-existing");
    let mut spec = process_job.spec();
    spec.queue = queue.clone();
    spec.queue_type = Some(QueueType::Classic);
    let _cleanup = Cleanup::of(&spec);
    // An older deployment declared the classic topology.
    start_and_stop_with(&url(), |s| *s = spec.clone()).await;

    let refused = test_runtime(Journal::default())
        .consumer_with(process_job, |s| s.queue = queue.clone())
        .run()
        .await;
    let Err(error @ Error::TopologyConflict { .. }) = refused else {
        panic!("expected a topology conflict, got {refused:?}");
    };
    let message = error.to_string();
    for words in [queue.as_str(), "queue_type = \"classic\""] {
        assert!(message.contains(words), "{words}: {message}");
    }

    // With the line added, the classic queue is adopted.
    start_and_stop_with(&url(), |s| {
        s.queue = queue.clone();
        s.queue_type = Some(QueueType::Classic);
    })
    .await;
}

/// Deletes a virtual host, and every queue and exchange in it, when dropped.
struct DeleteVhost(String);

impl Drop for DeleteVhost {
    fn drop(&mut self) {
        let _ = rabbitmqctl().args(["delete_vhost", &self.0]).output();
    }
}
