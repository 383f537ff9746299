//! Publisher confirms and the faults a test can inject.

use futures_util::StreamExt;

use super::*;
use rabbit_backoff_runtime::transport::Confirm;

#[tokio::test(start_paused = true)]
async fn confirms_say_acked_returned_or_nacked() {
    let (broker, ch) = setup_with(&["q"]).await;
    let send = |key: &'static str| {
        let ch = Arc::clone(&ch);
        async move {
            ch.publish(Publication::new("", key, b"x", labelled("x")))
                .await
                .unwrap()
        }
    };
    assert_eq!(send("q").await, Confirm::Ack);
    assert_eq!(send("nobody").await, Confirm::Returned);

    broker.nack_publishes_to("q", 2);
    assert_eq!(send("q").await, Confirm::Nack);
    assert_eq!(send("q").await, Confirm::Nack);
    assert_eq!(send("q").await, Confirm::Ack);
    // Nacked messages were not enqueued.
    assert_eq!(broker.queue_depth("q"), 2);

    broker.return_publishes_to("q", 1);
    assert_eq!(send("q").await, Confirm::Returned);
    assert_eq!(send("q").await, Confirm::Ack);
    assert_eq!(broker.queue_depth("q"), 3);
}

#[tokio::test(start_paused = true)]
async fn a_failed_publish_closes_its_channel_and_returns_its_deliveries() {
    let (broker, ch) = setup_with(&["q"]).await;
    put(&ch, "q", "held").await;
    let held = take(&ch, "q").await;

    broker.fail_next_publishes(1);
    let failed = ch
        .publish(Publication::new("", "q", b"lost", labelled("lost")))
        .await;
    let Err(TransportError::Closed(reason)) = failed else {
        panic!("expected a closed channel, got {failed:?}");
    };
    assert!(reason.contains("fail_next_publishes"), "{reason}");
    assert!(matches!(
        ch.check_queue("q").await,
        Err(TransportError::Closed(_))
    ));
    assert!(held.acker.ack().await.is_err());
    assert_eq!(labels(&broker, "q"), ["held"]);
    // Only one publish fails.
    put(&open(&broker).await, "q", "next").await;
    assert_eq!(labels(&broker, "q"), ["held", "next"]);
}

#[tokio::test(start_paused = true)]
async fn close_channels_ends_consumers_with_an_error_and_keeps_connections() {
    let (broker, ch) = setup_with(&["q"]).await;
    let connection = broker.connect().await.unwrap();
    let consuming = connection.open_channel().await.unwrap();
    let mut consumer = consuming.consume("q").await.unwrap();
    put(&ch, "q", "m").await;
    let held = next(&mut consumer).await;

    broker.close_channels();
    match consumer.stream.next().await {
        Some(Err(TransportError::Closed(_))) => {}
        other => panic!("expected an error, got {other:?}"),
    }
    assert!(consumer.stream.next().await.is_none());
    assert!(held.acker.ack().await.is_err());
    let back = broker.messages("q");
    assert_eq!(back.len(), 1);
    assert!(back[0].redelivered());
    // Connections survive: a new channel works.
    let reopened = connection.open_channel().await.unwrap();
    let again = take(&reopened, "q").await;
    assert!(again.redelivered);
}

#[tokio::test(start_paused = true)]
async fn close_connections_is_a_broker_restart_that_keeps_queues() {
    let (broker, ch) = setup_with(&["q"]).await;
    put(&ch, "q", "m").await;
    let mut consumer = ch.consume("q").await.unwrap();
    let _held = next(&mut consumer).await;

    broker.close_connections();
    match consumer.stream.next().await {
        Some(Err(TransportError::Closed(text))) => {
            assert!(text.starts_with("CONNECTION_FORCED"), "{text}")
        }
        other => panic!("expected CONNECTION_FORCED, got {other:?}"),
    }
    assert!(ch.check_queue("q").await.is_err());
    let fresh = open(&broker).await;
    let again = take(&fresh, "q").await;
    assert_eq!(label(&again), "m");
    assert!(again.redelivered);
}

#[tokio::test(start_paused = true)]
async fn a_connection_closed_by_the_broker_reports_itself_lost() {
    let broker = TestBroker::new();
    let connection = broker.connect().await.unwrap();
    let other = broker.connect().await.unwrap();
    let lost = connection.lost();
    assert!(!lost.is_lost());
    let watching = tokio::spawn({
        let lost = lost.clone();
        async move { lost.wait().await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!watching.is_finished(), "an open connection is not lost");

    broker.close_connections();
    let reason = watching.await.unwrap();
    assert!(reason.starts_with("CONNECTION_FORCED"), "{reason}");
    assert!(other.lost().is_lost(), "every connection of the broker");
    let fresh = broker.connect().await.unwrap();
    assert!(!fresh.lost().is_lost(), "a new connection is not");
    // An operation that would otherwise have run fails at once.
    let skipped = lost.or_fail(async { Ok(()) }).await.unwrap_err();
    assert!(
        skipped.to_string().contains("the connection was lost"),
        "{skipped}"
    );
}
