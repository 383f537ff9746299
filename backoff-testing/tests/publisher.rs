//! The typed publisher on the in-memory broker: what it does when the
//! connection it publishes on is lost.

use rabbit_backoff::testing::TestBroker;
use rabbit_backoff::transport::Transport;
use rabbit_backoff::{Outgoing, Publisher};
use rabbit_backoff_core::QueueDecl;

#[tokio::test(start_paused = true)]
async fn a_publish_after_the_connection_was_lost_reconnects_first() {
    let broker = TestBroker::new();
    let queue = QueueDecl::new("q");
    let admin = broker.connect().await.unwrap();
    admin
        .open_channel()
        .await
        .unwrap()
        .declare_queue(&queue)
        .await
        .unwrap();
    let publisher = Publisher::with_transport(broker.clone()).await.unwrap();
    publisher
        .publish("", "q", Outgoing::raw(b"before".to_vec()))
        .await
        .unwrap();

    broker.close_connections();
    publisher
        .publish("", "q", Outgoing::raw(b"after".to_vec()))
        .await
        .expect("published on a new connection, not failed on the lost one");
    assert_eq!(broker.messages("q").len(), 2);
    publisher.close().await;
}
