//! How many messages per second the broker carries through publish →
//! consume → ack. Ignored by default (a measurement, not a check of
//! behaviour); run it in release mode:
//!
//! ```text
//! cargo test --release -p rabbit-backoff-testing -- --ignored --nocapture throughput
//! ```

use std::time::Instant;

use futures_util::StreamExt;
use lapin::BasicProperties;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run in release mode with --ignored --nocapture"]
async fn throughput_publish_consume_ack() {
    const MESSAGES: usize = 1_000_000;
    let broker = TestBroker::new();
    let publisher = open(&broker).await;
    declare_plain(&publisher, "q").await;
    let consuming = open(&broker).await;
    consuming.qos(1_000).await.unwrap();
    let mut deliveries = consuming.consume("q").await.unwrap();

    let started = Instant::now();
    let consumer = tokio::spawn(async move {
        for _ in 0..MESSAGES {
            let Some(Ok(delivery)) = deliveries.stream.next().await else {
                panic!("the stream ended early");
            };
            delivery.acker.ack().await.unwrap();
        }
    });
    let body = [7u8; 64];
    for _ in 0..MESSAGES {
        publisher
            .publish(Publication::new("", "q", &body, BasicProperties::default()))
            .await
            .unwrap();
    }
    consumer.await.unwrap();
    let elapsed = started.elapsed();
    let rate = MESSAGES as f64 / elapsed.as_secs_f64();
    println!("{MESSAGES} messages in {elapsed:?}: {rate:.0} messages/s");
    assert_eq!(broker.queue_depth("q"), 0);
    assert_eq!(broker.unacked_count("q"), 0);
}
