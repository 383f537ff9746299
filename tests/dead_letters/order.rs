//! The order of the dead-letter queue through a pass: kept on classic and
//! quorum queues, past the pass's window, and put right after a pass that
//! was killed or failed.

use super::*;

#[tokio::test]
async fn peek_and_replay_keep_the_order_of_a_quorum_dead_letter_queue() {
    let (_spec, _cleanup, (_c, _channel), dlq) = seeded_with(
        "quorum-dlq",
        |spec| spec.queue_type = Some(rabbit_backoff::QueueType::Quorum),
        6,
        |id| if id % 2 == 0 { "db down" } else { "invalid" },
        |_| 3,
    )
    .await;
    let limited = dlq
        .peek(&DeadLetterFilter::default().limit(1))
        .await
        .unwrap();
    assert_eq!(ids(&limited), ["m-0"]);
    let all = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(
        ids(&all),
        ["m-0", "m-1", "m-2", "m-3", "m-4", "m-5"],
        "a limited peek does not rotate the queue"
    );
    let report = dlq
        .replay(
            &DeadLetterFilter::default().error("db").unwrap().limit(2),
            &ReplayOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(ids(&report), ["m-0", "m-2"]);
    let rest = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(
        ids(&rest),
        ["m-1", "m-3", "m-4", "m-5"],
        "the rest keeps its order"
    );
    dlq.close().await;
}

/// Publishes dead letters `ids` fast (confirms awaited in batches).
async fn many_dead_letters(channel: &Channel, spec: &ConsumerSpec, ids: std::ops::Range<u64>) {
    let names = spec.names();
    let mut pending = Vec::new();
    for id in ids {
        let properties = one_of_two_groups(
            id,
            &[(
                "x-dead-letter-reason",
                AMQPValue::LongString("exhausted".into()),
            )],
        );
        pending.push(
            channel
                .basic_publish(
                    "".into(),
                    names.dead_letter_queue.as_str().into(),
                    BasicPublishOptions::default(),
                    b"{}",
                    properties,
                )
                .await
                .unwrap(),
        );
        confirmed(&mut pending, 500).await;
    }
    confirmed(&mut pending, 0).await;
}

/// The ids in the queue, in order, read once and returned (classic queue).
async fn order(dlq: &Dlq) -> Vec<u64> {
    ids_in_order(dlq, false).await
}

/// The ids in the queue, in order, read with a pass; with `never_returned`,
/// each checked never to have been returned to the queue (a quorum queue
/// counts a return toward its delivery limit, and puts the message at its
/// back).
async fn ids_in_order(dlq: &Dlq, never_returned: bool) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut collect =
        |delivery: &rabbit_backoff::transport::Delivery,
         message: &rabbit_backoff::dead_letters::DeadLetterMessage| {
            let id = message.message_id.as_deref().unwrap();
            assert!(
                !(never_returned && delivery.redelivered),
                "{id} was returned to the queue"
            );
            ids.push(id.trim_start_matches("m-").parse().unwrap());
            Ok(())
        };
    dlq.visit(&DeadLetterFilter::default(), &mut collect)
        .await
        .unwrap();
    ids
}

/// Asserts that the queue holds `expected` in its order after a pass was
/// killed and the next one put it right, each id first seen at its place
/// and copied at most as often as copies were in flight; returns the copies.
fn put_right(after: &[u64], expected: impl Iterator<Item = u64>) -> usize {
    let mut first_seen = Vec::new();
    for id in after {
        if !first_seen.contains(id) {
            first_seen.push(*id);
        }
    }
    assert_eq!(
        first_seen,
        expected.collect::<Vec<_>>(),
        "nothing lost, and in order"
    );
    let duplicates = after.len() - first_seen.len();
    assert!(
        duplicates <= 275,
        "at most the copies in flight: {duplicates}"
    );
    duplicates
}

#[tokio::test]
async fn a_pass_longer_than_its_window_keeps_the_order_and_a_killed_one_is_put_right() {
    let (spec, _cleanup) = declared("window").await;
    let marker = format!("{}.pass", spec.names().dead_letter_queue);
    let (connection, channel) = confirm_channel().await;
    const N: u64 = 2500;
    many_dead_letters(&channel, &spec, 0..N).await;
    let dlq = connect_dlq(&spec).await;

    // Past the window of 1000 held messages, the pass moves messages to the
    // back until its sentinel comes round: the order is the same after.
    assert_eq!(order(&dlq).await, (0..N).collect::<Vec<_>>());
    let groups = dlq.groups(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(
        groups.iter().map(|g| g.count).collect::<Vec<_>>(),
        [1250, 1250]
    );
    // Replaying one group interleaved with the other keeps the other's order.
    let odd = groups
        .iter()
        .find(|g| g.fingerprint == "timeout after <n> ms")
        .unwrap();
    let report = dlq
        .replay(
            &DeadLetterFilter::default().group(odd.id.clone()),
            &ReplayOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(report.matched.len(), 1250);
    assert_eq!(report.kept, 1250);
    assert_eq!(
        order(&dlq).await,
        (0..N).filter(|id| id % 2 == 0).collect::<Vec<_>>()
    );
    let work = declare::passive(&channel, &spec.queue).await;
    assert_eq!(work.message_count(), 1250, "the group is in the work queue");
    dlq.close().await;

    // A pass killed midway (its connection closed once it moves messages)
    // leaves the queue rotated; the next pass puts it right first.
    let killed = std::sync::Arc::new(connect_dlq(&spec).await);
    let pass = tokio::spawn({
        let killed = killed.clone();
        async move { killed.peek(&DeadLetterFilter::default()).await }
    });
    let deadline = Instant::now() + WAIT;
    loop {
        // A failed passive declare closes its channel: a new one each time.
        let probe = connection.create_channel().await.unwrap();
        let moving = declare::try_passive(&probe, &marker).await;
        if moving.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "the pass never started moving");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // At once: RabbitMQ 4.3 moves the 1250 in well under 100 ms.
    killed.close().await;
    assert!(pass.await.unwrap().is_err(), "the killed pass reports it");

    let dlq = connect_dlq(&spec).await;
    let duplicates = put_right(&order(&dlq).await, (0..N).filter(|id| id % 2 == 0));
    println!("killed pass: {duplicates} duplicates");
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

/// The ids of a quorum queue in order, read with a pass, none returned.
async fn quorum_order(dlq: &Dlq) -> Vec<u64> {
    ids_in_order(dlq, true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_pass_keeps_the_order_even_when_someone_else_takes_messages_meanwhile() {
    let (spec, _cleanup) = declared_with("quorum-pass", |spec| {
        spec.queue_type = Some(rabbit_backoff::QueueType::Quorum)
    })
    .await;
    let dead_letter_queue = spec.names().dead_letter_queue;
    let (connection, channel) = confirm_channel().await;
    // Past the window a consumer of the pass is sent before it acks.
    const N: u64 = 1500;
    many_dead_letters(&channel, &spec, 0..N).await;
    let dlq = connect_dlq(&spec).await;
    assert_eq!(quorum_order(&dlq).await, (0..N).collect::<Vec<_>>());

    // Someone else takes 5 messages from the head early in the pass: the
    // pass's consumer, allowed as many messages as were before its
    // sentinel, is then sent 5 from behind it, which it puts back in order.
    let mut stolen = Vec::new();
    let mut steal =
        |_: &rabbit_backoff::transport::Delivery,
         message: &rabbit_backoff::dead_letters::DeadLetterMessage| {
            if message.message_id.as_deref() == Some("m-10") {
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(async {
                        for _ in 0..5 {
                            let taken = next_message_acked(&channel, &dead_letter_queue).await;
                            taken
                                .acker
                                .ack(lapin::options::BasicAckOptions::default())
                                .await
                                .unwrap();
                            let id = taken.properties.message_id().as_ref().unwrap().to_string();
                            stolen.push(id.trim_start_matches("m-").parse::<u64>().unwrap());
                        }
                    })
                });
            }
            Ok(())
        };
    dlq.visit(&DeadLetterFilter::default(), &mut steal)
        .await
        .unwrap();
    assert_eq!(stolen.len(), 5);
    assert_eq!(
        quorum_order(&dlq).await,
        (0..N).filter(|id| !stolen.contains(id)).collect::<Vec<_>>(),
        "nothing lost, duplicated or moved"
    );
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn a_pass_that_fails_after_coming_round_leaves_its_sentinel_for_the_next() {
    // On the in-memory broker, so that the failure lands exactly there: the
    // rotation has reached its sentinel and still has a batch to copy.
    // Past the window, and not a whole number of batches.
    const N: u64 = 1260;
    let (broker, spec) = in_memory_dead_letters("in-memory-rotation", 0..N).await;
    let names = spec.names();
    let dlq = Dlq::with_transport(broker.clone(), &spec).await.unwrap();
    let mut fail_after_the_last =
        |_: &rabbit_backoff::transport::Delivery,
         message: &rabbit_backoff::dead_letters::DeadLetterMessage| {
            if message.message_id.as_deref() == Some(&*format!("m-{}", N - 1)) {
                broker.fail_next_publishes(1);
            }
            Ok(())
        };
    assert!(
        dlq.visit(&DeadLetterFilter::default(), &mut fail_after_the_last)
            .await
            .is_err(),
        "the pass reports the copy it could not make"
    );

    put_right(&order(&dlq).await, 0..N);
    assert!(
        !broker.queue_exists(&format!("{}.pass", names.dead_letter_queue)),
        "the marker queue is gone once the order is right"
    );
    dlq.close().await;
}
