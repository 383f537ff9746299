//! The runtime's metadata watch on the in-memory broker: a broker cut off
//! from its majority (`TestBroker::lose_majority`) is left, the consumer
//! reconnects, and consumes again once the broker answers; with the watch
//! off (the default for a transport without several nodes), nothing
//! happens.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rabbit_backoff::RunningRuntime;
use rabbit_backoff::prelude::*;
use rabbit_backoff::rules::MetadataWatch;
use rabbit_backoff::testing::TestBroker;
use rabbit_backoff::transport::Confirm;

#[derive(Debug, Classify)]
enum Never {}

impl std::fmt::Display for Never {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

#[derive(Default)]
struct Handled(AtomicU32);

#[backoff_consumer(queue = "watched", delays = "5s")]
async fn watched(_id: u32, handled: State<Handled>) -> Result<(), Never> {
    handled.0.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

async fn start(
    broker: &TestBroker,
    watch: Option<MetadataWatch>,
) -> (RunningRuntime, std::sync::Arc<Handled>) {
    let handled = std::sync::Arc::new(Handled::default());
    let mut builder = Runtime::builder()
        .transport(broker.clone())
        .state_arc(std::sync::Arc::clone(&handled))
        .handle_signals(false)
        .consumer(watched);
    if watch.is_some() {
        builder = builder.metadata_watch(watch);
    }
    let running = builder
        .start()
        .await
        .expect("starts on the in-memory broker");
    (running, handled)
}

#[tokio::test(start_paused = true)]
async fn a_broker_cut_off_from_its_majority_is_left_and_consumed_from_again() {
    let broker = TestBroker::new();
    let (running, handled) = start(&broker, Some(MetadataWatch::default())).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(running.health().reconnects(), 0, "a healthy broker is kept");

    broker.lose_majority(true);
    tokio::time::sleep(MetadataWatch::default().notices_within()).await;
    assert!(
        running.health().reconnects() >= 1,
        "the broker is left within the bound"
    );
    broker.lose_majority(false);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let reconnects = running.health().reconnects();
    assert_eq!(
        broker.publish_json("watched", "watched", &1).await,
        Confirm::Ack
    );
    broker.run_until_idle().await;
    assert_eq!(handled.0.load(Ordering::SeqCst), 1, "consumed again");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        running.health().reconnects(),
        reconnects,
        "healed: no more reconnects"
    );
    running.stop().await.expect("stops");
}

#[tokio::test(start_paused = true)]
async fn without_several_nodes_the_watch_is_off_by_default() {
    let broker = TestBroker::new();
    let (running, _handled) = start(&broker, None).await;
    broker.lose_majority(true);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(running.health().reconnects(), 0);
    running.stop().await.expect("stops");
}
