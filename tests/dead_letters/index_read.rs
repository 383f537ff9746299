//! Reading the dead-letter index: in ranges, over the stream protocol or
//! AMQP (and back to AMQP when the stream port does not answer), with the
//! dead letters of retried messages.

use super::*;

/// Dead letters `ids` through the dead-letter exchange, as the runtime
/// writes them, each with a `x-failed-at` of its own id, so that writing
/// one id twice writes two entries alike; confirmed in batches, each
/// batch's entries written once it is.
async fn indexed_dead_letters(
    channel: &Channel,
    spec: &ConsumerSpec,
    ids: impl IntoIterator<Item = u64>,
) {
    let names = spec.names();
    let text = |s: String| AMQPValue::LongString(s.into_bytes().into());
    let mut pending = Vec::new();
    let mut entries = Vec::new();
    for id in ids {
        let error = match id % 3 {
            0 => format!("order {id} not found"),
            1 => format!("payment gateway timeout after {id} ms"),
            _ => format!("database unavailable: connection {id} refused"),
        };
        let mut headers = FieldTable::default();
        headers.insert("x-error".into(), text(error));
        headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(3));
        headers.insert(
            "x-failed-at".into(),
            text(format!(
                "2026-12-04T00:00:{:02}.{:03}Z",
                id / 1000 % 60,
                id % 1000
            )),
        );
        headers.insert("x-dead-letter-reason".into(), text("exhausted".into()));
        let properties = BasicProperties::default()
            .with_message_id(format!("m-{id}").into())
            .with_delivery_mode(2)
            .with_headers(headers);
        let confirm = channel
            .basic_publish(
                names.dead_letter_exchange.as_str().into(),
                names.dead_letter_routing_key.as_str().into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                b"{}",
                properties.clone(),
            )
            .await
            .unwrap();
        pending.push(confirm);
        entries.push((properties, 2));
        if pending.len() >= 1000 {
            confirmed(&mut pending, 0).await;
            index_entries(spec, &entries).await;
            entries.clear();
        }
    }
    confirmed(&mut pending, 0).await;
    index_entries(spec, &entries).await;
}

/// An index long enough to be read in ranges on several channels at once
/// gives the groups of a read on one channel and of a pass, also when a
/// tombstone's key has entries in two ranges: a dead letter written twice
/// alike, one copy discarded. The range that guessed wrong (that its copy
/// was the one the tombstone cancels) is read again.
#[tokio::test]
async fn an_index_read_in_ranges_groups_like_one_read() {
    use rabbit_backoff::dead_letters::GroupSource;
    let (spec, _cleanup) = declared("index-ranges").await;
    let (connection, channel) = confirm_channel().await;
    // Three ranges of at least 10 000 entries; m-7 at the start and again
    // at the end, alike.
    indexed_dead_letters(&channel, &spec, (0..30_000).chain([7])).await;
    let dlq = connect_dlq(&spec).await;
    let discarded = dlq
        .discard(&DeadLetterFilter::default().message_id("m-7").limit(1))
        .await
        .unwrap();
    assert_eq!(discarded.matched.len(), 1);

    let all = DeadLetterFilter::default();
    let one = dlq.index_readers(1);
    let on_one = one.group_report(&all).await.unwrap();
    assert_eq!(on_one.source, GroupSource::Index, "{}", on_one.reason());
    assert_eq!(on_one.groups.iter().map(|g| g.count).sum::<usize>(), 30_000);
    let three = one.index_readers(3);
    let on_three = three.group_report(&all).await.unwrap();
    assert_eq!(on_three.source, GroupSource::Index, "{}", on_three.reason());
    assert_eq!(on_three.groups, on_one.groups);
    // A filter, in ranges too.
    let timeouts = DeadLetterFilter::default().error("timeout").unwrap();
    let filtered = three.group_report(&timeouts).await.unwrap();
    assert_eq!(filtered.source, GroupSource::Index, "{}", filtered.reason());
    let pass = three.use_index(false);
    assert_eq!(pass.groups(&all).await.unwrap(), on_one.groups);
    assert_eq!(pass.groups(&timeouts).await.unwrap(), filtered.groups);
    pass.close().await;
    let _ = connection.close(200, "".into()).await;
}

/// Dead letters with every property the index's key reads (message and
/// correlation ids, a timestamp) and headers of several types, some of them
/// discarded (tombstones), then read from the index over the stream
/// protocol: the same groups as over AMQP and as a pass, and the stream
/// protocol was used.
#[tokio::test]
async fn an_index_read_over_the_stream_protocol_groups_like_one_over_amqp() {
    use rabbit_backoff::dead_letters::GroupSource;
    use rabbit_backoff::dead_letters::IndexProtocol;
    let (spec, _cleanup) = declared("index-stream-protocol").await;
    let (connection, channel) = confirm_channel().await;
    indexed_dead_letters(&channel, &spec, 0..12_000).await;
    let names = spec.names();
    let mut quota = Vec::new();
    for id in 0..30u64 {
        let mut headers = FieldTable::default();
        let text = |s: &str| AMQPValue::LongString(s.as_bytes().into());
        headers.insert(
            "x-error".into(),
            text(&format!("tenant {} over quota", id % 2)),
        );
        headers.insert("x-retry-count".into(), AMQPValue::ShortShortInt(2));
        headers.insert("x-dead-letter-reason".into(), text("permanent"));
        headers.insert("x-original-queue".into(), text(&spec.queue));
        headers.insert("weight".into(), AMQPValue::Double(0.1 * id as f64));
        headers.insert("urgent".into(), AMQPValue::Boolean(id % 2 == 0));
        headers.insert("seen-at".into(), AMQPValue::Timestamp(1_700_000_000 + id));
        let body = b"{\"quota\": 1}";
        let properties = BasicProperties::default()
            .with_message_id(format!("quota-\"{id}\" \u{e9}").into())
            .with_correlation_id(format!("c-{id}").into())
            .with_timestamp(1_700_000_100 + id)
            .with_content_type("application/json".into())
            .with_delivery_mode(2)
            .with_headers(headers);
        channel
            .basic_publish(
                names.dead_letter_exchange.as_str().into(),
                names.dead_letter_routing_key.as_str().into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                body,
                properties.clone(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        quota.push((properties, body.len()));
    }
    index_entries(&spec, &quota).await;
    let dlq = connect_dlq(&spec).await;
    // Tombstones: their keys must cancel the entries read over the stream
    // protocol, or the count check fails.
    let tenant = DeadLetterFilter::default().error("tenant 1").unwrap();
    assert_eq!(dlq.discard(&tenant).await.unwrap().matched.len(), 15);
    let some = DeadLetterFilter::default().message_id("m-42");
    assert_eq!(dlq.discard(&some).await.unwrap().matched.len(), 1);

    let all = DeadLetterFilter::default();
    let over_stream = dlq.group_report(&all).await.unwrap();
    assert_eq!(
        over_stream.source,
        GroupSource::Index,
        "{}",
        over_stream.reason()
    );
    assert_eq!(
        over_stream.index_protocol(),
        Some(IndexProtocol::Stream),
        "read over the stream protocol at port {}",
        stream_port()
    );
    assert_eq!(
        over_stream.groups.iter().map(|g| g.count).sum::<usize>(),
        12_000 - 1 + 15
    );
    let quota = DeadLetterFilter::default().error("over quota").unwrap();
    let filtered = dlq.group_report(&quota).await.unwrap();
    assert_eq!(filtered.source, GroupSource::Index, "{}", filtered.reason());
    assert_eq!(filtered.index_protocol(), Some(IndexProtocol::Stream));
    assert_eq!(filtered.groups.iter().map(|g| g.count).sum::<usize>(), 15);

    let amqp = dlq.stream_protocol(false);
    let over_amqp = amqp.group_report(&all).await.unwrap();
    assert_eq!(
        over_amqp.source,
        GroupSource::Index,
        "{}",
        over_amqp.reason()
    );
    assert_eq!(over_amqp.index_protocol(), Some(IndexProtocol::Amqp));
    assert_eq!(over_amqp.groups, over_stream.groups);
    assert_eq!(
        amqp.group_report(&quota).await.unwrap().groups,
        filtered.groups
    );
    let pass = amqp.use_index(false);
    assert_eq!(pass.groups(&all).await.unwrap(), over_stream.groups);
    pass.close().await;
    let _ = connection.close(200, "".into()).await;
}

/// Dead letters the consumer itself made, after the broker dead-lettered
/// their retry copies back from a tier (so each carries the broker's
/// `x-death`, which enters the index key), are grouped from the index over
/// the stream protocol, as a pass groups them.
#[tokio::test]
async fn dead_letters_of_retried_messages_are_grouped_from_the_index() {
    use rabbit_backoff::dead_letters::GroupSource;
    use rabbit_backoff::dead_letters::IndexProtocol;
    let running = Running::start("index-retried", |spec| {
        spec.delays = "1ms".parse().unwrap();
    })
    .await;
    let publisher = publisher().await;
    for id in 0..30 {
        let fail = if id % 3 == 0 {
            Fail::Permanent
        } else {
            Fail::Transient
        };
        running.publish(&publisher, &Job::new(id, fail, None)).await;
    }
    let (_c, channel) = channel().await;
    eventually_depth(&channel, &running.spec.names().dead_letter_queue, 30).await;
    let dlq = connect_dlq(&running.spec).await;
    let all = DeadLetterFilter::default();
    let exhausted: Vec<_> = dlq
        .peek(&all)
        .await
        .unwrap()
        .matched
        .into_iter()
        .filter(|m| m.reason.as_deref() == Some("exhausted"))
        .collect();
    assert_eq!(exhausted.len(), 20);
    assert!(
        exhausted.iter().all(|m| m.headers.contains_key("x-death")),
        "{exhausted:?}"
    );
    let report = dlq.group_report(&all).await.unwrap();
    assert_eq!(report.source, GroupSource::Index, "{}", report.reason());
    assert_eq!(
        report.index_protocol(),
        Some(IndexProtocol::Stream),
        "every entry turned back from the stream, `x-death` and all"
    );
    let pass = dlq.use_index(false);
    assert_eq!(report.groups, pass.groups(&all).await.unwrap());
    let counts = |report: &rabbit_backoff::dead_letters::GroupReport| {
        let mut counts: Vec<(String, usize)> = report
            .groups
            .iter()
            .map(|g| (g.reason.clone(), g.count))
            .collect();
        counts.sort();
        counts
    };
    assert_eq!(
        counts(&report),
        [("exhausted".to_owned(), 20), ("permanent".to_owned(), 10)]
    );
    // Their tombstones, keyed as read from the queue, cancel their entries
    // read from the stream: the index still answers, without them.
    let some = DeadLetterFilter::default()
        .message_ids(exhausted[..5].iter().map(|m| m.message_id.clone().unwrap()));
    assert_eq!(pass.discard(&some).await.unwrap().matched.len(), 5);
    let indexed = pass.use_index(true);
    let after = indexed.group_report(&all).await.unwrap();
    assert_eq!(after.source, GroupSource::Index, "{}", after.reason());
    assert_eq!(after.index_protocol(), Some(IndexProtocol::Stream));
    assert_eq!(
        counts(&after),
        [("exhausted".to_owned(), 15), ("permanent".to_owned(), 10)]
    );
    let over_amqp = indexed.stream_protocol(false);
    let read = over_amqp.group_report(&all).await.unwrap();
    assert_eq!(read.source, GroupSource::Index, "{}", read.reason());
    assert_eq!(read.groups, after.groups);
    over_amqp.close().await;
    running.stop().await;
}

/// A stream port that does not answer: the index is read over AMQP, with
/// the same groups.
#[tokio::test]
async fn an_index_read_falls_back_to_amqp_when_the_stream_port_does_not_answer() {
    use rabbit_backoff::dead_letters::GroupSource;
    use rabbit_backoff::dead_letters::IndexProtocol;
    let (spec, _cleanup) = declared("index-stream-fallback").await;
    let (connection, channel) = confirm_channel().await;
    indexed_dead_letters(&channel, &spec, 0..300).await;
    let dlq = connect_dlq(&spec).await;
    let all = DeadLetterFilter::default();
    let over_stream = dlq.group_report(&all).await.unwrap();
    assert_eq!(over_stream.index_protocol(), Some(IndexProtocol::Stream));
    // Nothing listens on port 1.
    let closed = dlq.stream_port(1);
    let fallen_back = closed.group_report(&all).await.unwrap();
    assert_eq!(
        fallen_back.source,
        GroupSource::Index,
        "{}",
        fallen_back.reason()
    );
    assert_eq!(fallen_back.index_protocol(), Some(IndexProtocol::Amqp));
    assert_eq!(fallen_back.groups, over_stream.groups);
    let off = closed.stream_port(stream_port()).stream_protocol(false);
    let over_amqp = off.group_report(&all).await.unwrap();
    assert_eq!(over_amqp.index_protocol(), Some(IndexProtocol::Amqp));
    assert_eq!(over_amqp.groups, over_stream.groups);
    off.close().await;
    let _ = connection.close(200, "".into()).await;
}
