//! Peek, replay and discard: what they take from the dead-letter queue and
//! where it goes; and `status`, which counts every tier.

use super::*;

#[tokio::test]
async fn peek_leaves_the_queue_unchanged() {
    let (_spec, _cleanup, (_c, channel), dlq) = seeded(
        "peek",
        10,
        |id| if id % 2 == 0 { "db down" } else { "invalid" },
        |id| id as i64 % 4,
    )
    .await;
    let all = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(
        ids(&all),
        (0..10).map(|i| format!("m-{i}")).collect::<Vec<_>>()
    );
    assert_eq!(all.matched[3].retry_count, Some(3));
    assert_eq!(all.matched[0].error.as_deref(), Some("db down"));
    assert_eq!(
        all.matched[0].headers.get("tenant").map(String::as_str),
        Some("acme")
    );
    assert!(all.matched[0].body_preview.contains("\"id\":0"));

    let filtered = dlq
        .peek(
            &DeadLetterFilter::default()
                .error("^db")
                .unwrap()
                .min_count(2)
                .limit(1),
        )
        .await
        .unwrap();
    assert_eq!(ids(&filtered), ["m-2"]);
    assert_eq!(filtered.kept, 10);

    let again = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(ids(&again), ids(&all), "same messages, same order");
    assert!(
        again.matched.iter().all(|m| m.redelivered),
        "the broker marks them redelivered"
    );
    assert_eq!(depth(&channel, dlq.dead_letter_queue()).await, 10);
    dlq.close().await;
}

#[tokio::test]
async fn replay_moves_exactly_the_filtered_subset() {
    let (spec, _cleanup, (_c, channel), dlq) = seeded(
        "replay",
        10,
        |id| if id % 3 == 0 { "db down" } else { "invalid" },
        |_| 3,
    )
    .await;
    let report = dlq
        .replay(
            &DeadLetterFilter::default().error("db").unwrap(),
            &ReplayOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(ids(&report), ["m-0", "m-3", "m-6", "m-9"]);
    assert_eq!(report.kept, 6);

    let mut replayed = Vec::new();
    for _ in 0..4 {
        let message = next_message(&channel, &spec.queue, WAIT).await;
        let p = &message.delivery.properties;
        assert_eq!(header_int(p, "x-retry-count"), Some(0), "counter reset");
        assert_eq!(header_str(p, "x-error"), None, "failure headers moved");
        assert!(header_str(p, "x-replayed-at").is_some());
        let Some(AMQPValue::FieldArray(history)) = header(p, "x-replay-history") else {
            panic!("history")
        };
        let Some(AMQPValue::FieldTable(entry)) = history.as_slice().first() else {
            panic!("entry")
        };
        assert_eq!(
            entry.inner().get("x-error"),
            Some(&AMQPValue::LongString("db down".into()))
        );
        assert_eq!(
            header_str(p, "tenant").as_deref(),
            Some("acme"),
            "other headers kept"
        );
        assert_eq!(p.delivery_mode(), &Some(2));
        replayed.push(p.message_id().as_ref().unwrap().to_string());
    }
    assert_eq!(replayed, ["m-0", "m-3", "m-6", "m-9"], "in order");
    assert_eq!(depth(&channel, &spec.queue).await, 0, "nothing else moved");
    let rest = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(
        ids(&rest),
        ["m-1", "m-2", "m-4", "m-5", "m-7", "m-8"],
        "the rest untouched, in order"
    );

    let dry = dlq
        .replay(
            &DeadLetterFilter::default(),
            &ReplayOptions::default().dry_run(true),
        )
        .await
        .unwrap();
    assert_eq!(dry.matched.len(), 6);
    assert_eq!(
        depth(&channel, dlq.dead_letter_queue()).await,
        6,
        "a dry run moves nothing"
    );
    dlq.close().await;
}

#[tokio::test]
async fn replayed_messages_go_through_the_tiers_again_from_the_first() {
    let running = Running::start("again", |_| {}).await;
    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(1, Fail::Transient, None))
        .await;
    let (_c, channel) = channel().await;
    let dlq_name = running.spec.names().dead_letter_queue;
    eventually("the first dead letter", WAIT, || {
        running.journal.calls_for(1).len() == 4
    })
    .await;
    eventually_depth(&channel, &dlq_name, 1).await;

    let dlq = connect_dlq(&running.spec).await;
    let report = dlq
        .replay(&DeadLetterFilter::default(), &ReplayOptions::default())
        .await
        .unwrap();
    assert_eq!(report.matched.len(), 1);
    eventually("four more attempts", WAIT, || {
        running.journal.calls_for(1).len() == 8
    })
    .await;
    let counts = running.journal.retry_counts(1);
    assert_eq!(
        counts,
        [0, 1, 2, 3, 0, 1, 2, 3],
        "the replay starts again at the first tier"
    );
    let dead = next_message(&channel, &dlq_name, WAIT).await;
    let Some(AMQPValue::FieldArray(history)) =
        header(&dead.delivery.properties, "x-replay-history")
    else {
        panic!("the second dead letter remembers the first failure")
    };
    assert_eq!(history.as_slice().len(), 1);
    dlq.close().await;
    running.stop().await;
}

#[tokio::test]
async fn a_replay_interrupted_by_closing_its_connection_loses_nothing() {
    let (spec, _cleanup, (_c, channel), dlq) =
        seeded("interrupted", 50, |_| "db down", |_| 3).await;
    let dlq = std::sync::Arc::new(dlq);
    let replaying = {
        let dlq = dlq.clone();
        tokio::spawn(async move {
            dlq.replay(
                &DeadLetterFilter::default(),
                &ReplayOptions::default().rate(40.0),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    dlq.close().await;
    assert!(replaying.await.unwrap().is_err(), "the replay stopped");

    let mut seen = std::collections::BTreeMap::<u64, u32>::new();
    let mut moved = 0;
    for queue in [spec.queue.as_str(), dlq.dead_letter_queue()] {
        while let Some(m) = channel
            .basic_get(
                queue.into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
            .unwrap()
        {
            let job: Job = serde_json::from_slice(&m.delivery.data).unwrap();
            *seen.entry(job.id).or_default() += 1;
            moved += usize::from(queue == spec.queue);
        }
    }
    assert!(
        moved > 0 && moved < 50,
        "interrupted in the middle: {moved} of 50 moved"
    );
    let missing: Vec<u64> = (0..50).filter(|id| !seen.contains_key(id)).collect();
    assert!(missing.is_empty(), "lost {missing:?}");
}

#[tokio::test]
async fn replay_honours_its_rate() {
    let (spec, _cleanup, (_c, channel), dlq) = seeded("rate", 100, |_| "db down", |_| 3).await;
    let started = Instant::now();
    let report = dlq
        .replay(
            &DeadLetterFilter::default(),
            &ReplayOptions::default().rate(50.0),
        )
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(report.matched.len(), 100);
    assert!(
        took >= Duration::from_millis(1800),
        "100 messages at 50/s took {took:?}"
    );
    assert_eq!(depth(&channel, &spec.queue).await, 100);
    dlq.close().await;
}

#[tokio::test]
async fn discard_removes_only_what_matches() {
    let (_spec, _cleanup, (_c, _channel), dlq) = seeded(
        "discard",
        6,
        |id| if id < 2 { "invalid" } else { "db down" },
        |_| 0,
    )
    .await;
    let report = dlq
        .discard(&DeadLetterFilter::default().error("invalid").unwrap())
        .await
        .unwrap();
    assert_eq!(ids(&report), ["m-0", "m-1"]);
    let rest = dlq.peek(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(ids(&rest), ["m-2", "m-3", "m-4", "m-5"]);
    dlq.close().await;
}

#[tokio::test]
async fn status_counts_every_tier_including_older_ones() {
    let (spec, _cleanup) = declared("status").await;
    let names = spec.names();
    let old_tier = names.retry_queue(42);
    let _old = Cleanup::default().queue(&old_tier);
    let (connection, channel) = confirm_channel().await;
    declare::queue(&channel, &old_tier, FieldTable::default()).await;
    publish(&channel, "", &old_tier, b"{}", BasicProperties::default()).await;
    for id in 0..3 {
        dead_letter(&channel, &spec, id, "db down", 3).await;
    }
    let listed = vec![
        old_tier.clone(),
        names.queue.clone(),
        "unrelated".to_owned(),
    ];
    let status = rabbit_backoff::status(
        &*framework_connection().await,
        &names,
        spec.delays.as_millis(),
        &listed,
    )
    .await
    .unwrap();
    type Row<'a> = (&'a str, &'a str, Option<u64>, bool, Option<u32>);
    let rows: Vec<Row> = status
        .queues
        .iter()
        .map(|q| (q.role, q.name.as_str(), q.delay_ms, q.current, q.messages))
        .collect();
    assert_eq!(rows[0], ("work", names.queue.as_str(), None, true, Some(0)));
    assert_eq!(
        rows[1],
        ("retry", old_tier.as_str(), Some(42), false, Some(1)),
        "the old tier, first by delay"
    );
    assert_eq!(rows[2].2, Some(100));
    assert_eq!(rows.len(), 6);
    assert_eq!(status.dead_letters(), 3);
    let _ = connection.close(200, "".into()).await;
}
