//! Groups: read from the dead-letter index, equal to a pass over the queue,
//! before and after replay, discard and import; a pass where the index
//! cannot answer.

use super::*;

#[tokio::test]
async fn groups_from_the_index_equal_groups_from_a_pass_before_and_after_replay_and_discard() {
    let (spec, _cleanup) = declared("index-groups").await;
    let (connection, channel) = confirm_channel().await;
    mixed_dead_letters(&channel, &spec, 0..30).await;
    let dlq = connect_dlq(&spec).await;
    let (dlq, groups) = index_equals_pass(dlq, &spec).await;
    assert_eq!(groups.len(), 3);
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 30);

    // A replay and a discard write tombstones: the index still describes
    // the queue. The replayed copies go to the work queue, not through the
    // dead-letter exchange.
    let replayed = dlq
        .replay(
            &DeadLetterFilter::default()
                .error("timeout")
                .unwrap()
                .limit(4),
            &ReplayOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(replayed.matched.len(), 4);
    let discarded = dlq
        .discard(&DeadLetterFilter::default().error("not found").unwrap())
        .await
        .unwrap();
    assert_eq!(discarded.matched.len(), 10);
    let (dlq, groups) = index_equals_pass(dlq, &spec).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 16);
    assert_eq!(groups.len(), 2);

    // New dead letters after the removals are indexed too.
    mixed_dead_letters(&channel, &spec, 30..33).await;
    let (dlq, groups) = index_equals_pass(dlq, &spec).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 19);
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn a_removal_without_a_tombstone_makes_groups_fall_back_to_a_pass() {
    let (spec, _cleanup) = declared("index-fallback").await;
    let names = spec.names();
    let (connection, channel) = confirm_channel().await;
    mixed_dead_letters(&channel, &spec, 0..9).await;
    let dlq = connect_dlq(&spec).await;
    let (dlq, _) = index_equals_pass(dlq, &spec).await;

    // A basic.get (as the management UI does) takes one without a tombstone.
    let got = channel
        .basic_get(
            names.dead_letter_queue.as_str().into(),
            lapin::options::BasicGetOptions { no_ack: true },
        )
        .await
        .unwrap();
    assert!(got.is_some());
    let report = all_groups(&dlq).await;
    assert_from_a_pass(
        &report,
        IndexFallback::CountMismatch {
            indexed: 9,
            depth: 8,
        },
    );
    assert_eq!(report.groups.iter().map(|g| g.count).sum::<usize>(), 8);

    // A purge leaves the index counting what is gone.
    channel
        .queue_purge(names.dead_letter_queue.as_str().into(), Default::default())
        .await
        .unwrap();
    let report = all_groups(&dlq).await;
    assert_eq!(
        report.source,
        rabbit_backoff::dead_letters::GroupSource::Pass
    );
    assert!(
        matches!(
            report.fallback,
            Some(rabbit_backoff::dead_letters::IndexFallback::CountMismatch { depth: 0, .. })
        ),
        "{:?}",
        report.fallback
    );
    assert!(report.groups.is_empty());
    // A limited read always follows the queue.
    let limited = dlq
        .group_report(&DeadLetterFilter::default().limit(1))
        .await
        .unwrap();
    assert_eq!(
        limited.fallback,
        Some(rabbit_backoff::dead_letters::IndexFallback::Limited)
    );
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

/// The broker's own dead-lettering (a reject without requeue, an expiry, a
/// length limit) delivers "stateless" to the queues the dead-letter
/// exchange routes to. RabbitMQ 3.10 drops such deliveries to a stream
/// (`rabbit_stream_queue:deliver/2` skips them; rabbitmq-server#7846, in
/// 3.11.x and 3.12, writes them): there the index misses them, and the
/// count check must catch it. Either way the groups are the queue's.
#[tokio::test]
async fn the_brokers_own_dead_lettering_is_indexed_or_caught_by_the_count_check() {
    let (spec, _cleanup) = declared("index-reject").await;
    let names = spec.names();
    let (connection, channel) = confirm_channel().await;
    // Rejected without requeue: the broker dead-letters them through the
    // work queue's dead-letter exchange.
    broker_dead_letters(&channel, &names.queue, 0, 3).await;
    eventually_depth(&channel, &names.dead_letter_queue, 3).await;
    let dlq = connect_dlq(&spec).await;
    let report = all_groups(&dlq).await;
    match report.source {
        rabbit_backoff::dead_letters::GroupSource::Index => assert_eq!(report.fallback, None),
        rabbit_backoff::dead_letters::GroupSource::Pass => assert_eq!(
            report.fallback,
            Some(rabbit_backoff::dead_letters::IndexFallback::CountMismatch {
                indexed: 0,
                depth: 3
            }),
            "the broker dropped its dead letters to the stream, and only those"
        ),
        other => panic!("a new source: {other:?}"),
    }
    assert_eq!(report.groups.len(), 1);
    assert_eq!(report.groups[0].count, 3);
    assert_eq!(report.groups[0].reason, "-");
    let dlq = dlq.use_index(false);
    assert_eq!(
        dlq.groups(&DeadLetterFilter::default()).await.unwrap(),
        report.groups
    );
    // Once they are gone through a pass, the index describes the queue again:
    // a tombstone without an entry cancels nothing.
    let dlq = dlq.use_index(true);
    dlq.discard(&DeadLetterFilter::default()).await.unwrap();
    mixed_dead_letters(&channel, &spec, 0..3).await;
    let (dlq, groups) = index_equals_pass(dlq, &spec).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 3);
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn the_in_memory_broker_has_no_index_and_groups_with_a_pass() {
    // Declaring the topology succeeds without the index (no streams here).
    let (broker, spec) = in_memory_dead_letters("in-memory", 0..4).await;
    let dlq = Dlq::with_transport(broker.clone(), &spec).await.unwrap();
    let report = all_groups(&dlq).await;
    assert_from_a_pass(&report, IndexFallback::Absent);
    assert_eq!(report.groups.len(), 1);
    assert_eq!(report.groups[0].count, 4);
    // A discard writes no tombstone anywhere, and does not fail for it.
    let discarded = dlq.discard(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(discarded.matched.len(), 4);
    dlq.close().await;
}

#[tokio::test]
async fn an_import_is_indexed_and_a_discard_of_everything_leaves_an_empty_index() {
    let (spec, _cleanup) = declared("index-import").await;
    let (connection, channel) = confirm_channel().await;
    mixed_dead_letters(&channel, &spec, 0..6).await;
    let dlq = connect_dlq(&spec).await;
    let mut exported = Vec::new();
    dlq.export(&DeadLetterFilter::default(), &mut exported)
        .await
        .unwrap();
    let discarded = dlq.discard(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(discarded.matched.len(), 6);
    let empty = all_groups(&dlq).await;
    assert_eq!(
        empty.source,
        rabbit_backoff::dead_letters::GroupSource::Index
    );
    assert!(empty.groups.is_empty());
    // `dlq import` publishes through the dead-letter exchange: indexed.
    let records = String::from_utf8(exported)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str::<rabbit_backoff::dead_letters::DeadLetterRecord>(line).unwrap()
        })
        .collect::<Vec<_>>();
    assert_eq!(dlq.import(records).await.unwrap(), 6);
    let (dlq, groups) = index_equals_pass(dlq, &spec).await;
    assert_eq!(groups.len(), 3);
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 6);
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}
