//! The AMQP 1.0 connection a holding channel consumes through: its loss,
//! seen by the connection that paired itself with it, and its vhost.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::BasicProperties;
use lapin::options::ConfirmSelectOptions;
use rabbit_backoff_runtime::transport::TransportError;
use rabbit_backoff_test_support::broker::{unique, url};
use rabbit_backoff_test_support::declare;
use rabbit_backoff_test_support::publish::publish;

use crate::broker::*;
use crate::fixture::*;
use crate::{PATIENCE, SERIAL};

#[tokio::test]
async fn closing_the_connection_broker_side_fires_lost() {
    let _serial = SERIAL.lock().await;
    let before = amqp1_connections();
    let Some((connection, channel)) = amqp1().await else {
        return;
    };
    let fixture = Fixture::new("amqp1-lost").await;
    let mut deliveries = channel.consume(&fixture.queue).await.expect("consume");
    let ours: Vec<String> = amqp1_connections()
        .into_iter()
        .filter(|pid| !before.contains(pid))
        .collect();
    assert!(
        !ours.is_empty(),
        "the broker lists the new AMQP 1.0 connection"
    );
    let lost = connection.lost();
    assert!(!lost.is_lost());
    for pid in &ours {
        rabbitmqctl_output(&["close_connection", pid, "amqp1 test: closed by the broker"]);
    }
    let why = tokio::time::timeout(PATIENCE, lost.wait())
        .await
        .expect("lost fires");
    eprintln!("lost: {why}");
    let ended = tokio::time::timeout(PATIENCE, deliveries.stream.next())
        .await
        .expect("the stream ends");
    assert!(
        matches!(ended, Some(Err(TransportError::Closed(_)))),
        "{ended:?}"
    );
    assert!(connection.open_channel().await.is_err());
    assert!(connection.open_holding_channel().await.is_err());
    channel.close().await;
    connection.close().await;
    fixture.close().await;
}

/// A virtual host other than the default one: RabbitMQ 4 reads it from the
/// open frame's hostname (`vhost:<name>`), and a queue of that vhost is
/// consumed there.
#[tokio::test]
async fn a_vhost_of_the_uri_is_the_connection_s() {
    let _serial = SERIAL.lock().await;
    if broker_version() < (4, 0) {
        // The refusal is asserted by the other tests.
        assert!(amqp1().await.is_none());
        return;
    }
    let vhost = unique("amqp1-vhost");
    rabbitmqctl_output(&["add_vhost", &vhost]);
    rabbitmqctl_output(&["set_permissions", "-p", &vhost, "guest", ".*", ".*", ".*"]);
    struct DeleteVhost(String);
    impl Drop for DeleteVhost {
        fn drop(&mut self) {
            let _ = rabbitmqctl().args(["delete_vhost", &self.0]).output();
        }
    }
    let _delete = DeleteVhost(vhost.clone());
    let base = url();
    let root = base
        .rsplit_once('/')
        .map_or(base.as_str(), |(root, _)| root);
    let vhost_url = format!("{root}/{}", vhost.replace('.', "%2E"));

    let lapin = lapin::Connection::connect(&vhost_url, lapin::ConnectionProperties::default())
        .await
        .expect("AMQP 0-9-1 on the vhost");
    let channel = lapin.create_channel().await.expect("a channel");
    let queue = "in-the-vhost";
    declare::queue(
        &channel,
        queue,
        declare::arguments(&[("x-queue-type", text("quorum"))]),
    )
    .await;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    publish(
        &channel,
        "",
        queue,
        b"in the vhost",
        BasicProperties::default(),
    )
    .await;

    let (connection, consuming) = amqp1_connect(&vhost_url)
        .await
        .expect("AMQP 1.0 on the vhost");
    let mut deliveries = consuming.consume(queue).await.expect("the vhost's queue");
    let delivery = next(&mut deliveries).await;
    assert_eq!(delivery.data, b"in the vhost");
    tokio::time::timeout(Duration::from_secs(5), delivery.acker.ack())
        .await
        .expect("ack answers")
        .expect("accepted");
    consuming.close().await;
    connection.close().await;
    // The default vhost has no such queue.
    let (default, elsewhere) = amqp1().await.expect("AMQP 1.0 on the default vhost");
    let missing = elsewhere.consume(queue).await.err();
    assert!(
        missing.as_ref().is_some_and(TransportError::is_not_found),
        "{missing:?}"
    );
    default.close().await;
    let _ = lapin.close(200, "done".into()).await;
}
