//! The dead-letter index after the queue changed behind its back (a purge,
//! a delete, a length limit, the broker's own dead letters): serving again
//! after one pass.

use super::*;

/// The first read after the index went out of step is a pass that says why
/// and leaves a checkpoint; the next is from the index, starting from that
/// checkpoint, with the groups of a pass. Returns those groups.
async fn heals(dlq: Dlq) -> (Dlq, Vec<rabbit_backoff::dead_letters::DeadLetterGroup>) {
    let first = all_groups(&dlq).await;
    healed(dlq, first).await
}

/// [`heals`], from its first read.
async fn healed(
    dlq: Dlq,
    first: rabbit_backoff::dead_letters::GroupReport,
) -> (Dlq, Vec<rabbit_backoff::dead_letters::DeadLetterGroup>) {
    use rabbit_backoff::dead_letters::{CheckpointNote, GroupSource, IndexFallback};
    let all = DeadLetterFilter::default();
    assert_eq!(first.source, GroupSource::Pass, "{}", first.reason());
    let Some(IndexFallback::CountMismatch { indexed, depth }) = first.fallback else {
        panic!("not out of step: {:?}", first.fallback)
    };
    assert_ne!(indexed, depth);
    assert!(
        matches!(first.checkpoint, Some(CheckpointNote::Written { .. })),
        "{:?}",
        first.checkpoint
    );
    assert!(
        first.reason().starts_with(&format!(
            "index out of step: {indexed} live entries, {depth} messages; checkpoint written"
        )),
        "{}",
        first.reason()
    );
    let Some(CheckpointNote::Written { offset }) = first.checkpoint else {
        unreachable!()
    };
    let second = dlq.group_report(&all).await.unwrap();
    assert_eq!(second.source, GroupSource::Index, "{}", second.reason());
    assert_eq!(second.fallback, None);
    assert_eq!(second.checkpoint, Some(CheckpointNote::ReadFrom { offset }));
    assert_eq!(second.groups, first.groups);
    let dlq = dlq.use_index(false);
    assert_eq!(dlq.groups(&all).await.unwrap(), second.groups);
    (dlq.use_index(true), second.groups)
}

/// A read from the index after a checkpoint, equal to a pass.
async fn index_equals_pass_past_a_checkpoint(
    dlq: Dlq,
) -> (Dlq, Vec<rabbit_backoff::dead_letters::DeadLetterGroup>) {
    let all = DeadLetterFilter::default();
    let from_index = dlq.group_report(&all).await.unwrap();
    assert_eq!(
        from_index.source,
        rabbit_backoff::dead_letters::GroupSource::Index,
        "{}",
        from_index.reason()
    );
    let dlq = dlq.use_index(false);
    assert_eq!(dlq.groups(&all).await.unwrap(), from_index.groups);
    (dlq.use_index(true), from_index.groups)
}

#[tokio::test]
async fn a_purge_from_outside_leaves_the_index_serving_after_one_pass() {
    let (spec, _cleanup) = declared("heal-purge").await;
    let names = spec.names();
    let (connection, channel) = confirm_channel().await;
    mixed_dead_letters(&channel, &spec, 0..30).await;
    let dlq = connect_dlq(&spec).await;
    let (dlq, _) = index_equals_pass(dlq, &spec).await;

    run_rabbitmqctl(&["purge_queue", &names.dead_letter_queue]);
    mixed_dead_letters(&channel, &spec, 30..40).await;
    let (dlq, groups) = heals(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 10);
    assert_eq!(groups.len(), 3);

    // Past the checkpoint: new dead letters are entries after it, and a
    // discard's tombstones come out of the checkpoint's groups.
    mixed_dead_letters(&channel, &spec, 40..43).await;
    let discarded = dlq
        .discard(&DeadLetterFilter::default().error("not found").unwrap())
        .await
        .unwrap();
    assert_eq!(discarded.matched.len(), 5);
    let (dlq, groups) = index_equals_pass_past_a_checkpoint(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 8);
    assert_eq!(groups.len(), 2);

    // A filter on the messages cannot be answered from the checkpoint's
    // groups: a pass, which writes no checkpoint (the index is in step).
    let filter = DeadLetterFilter::default().error("timeout").unwrap();
    let filtered = dlq.group_report(&filter).await.unwrap();
    assert_eq!(
        filtered.source,
        rabbit_backoff::dead_letters::GroupSource::Pass
    );
    assert!(
        matches!(
            filtered.fallback,
            Some(rabbit_backoff::dead_letters::IndexFallback::FilterPastCheckpoint { .. })
        ),
        "{:?}",
        filtered.fallback
    );
    assert_eq!(filtered.checkpoint, None);
    assert_eq!(filtered.groups.len(), 1);
    // A group is: the checkpoint keeps each group's id.
    let by_group = DeadLetterFilter::default().group(groups[0].id.clone());
    let one = dlq.group_report(&by_group).await.unwrap();
    assert_eq!(one.source, rabbit_backoff::dead_letters::GroupSource::Index);
    assert_eq!(one.groups, vec![groups[0].clone()]);
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn a_purge_through_the_library_leaves_an_empty_checkpoint() {
    let (spec, _cleanup) = declared("heal-lib-purge").await;
    let (connection, channel) = confirm_channel().await;
    mixed_dead_letters(&channel, &spec, 0..12).await;
    let dlq = connect_dlq(&spec).await;
    let purged = dlq.purge().await.unwrap();
    assert_eq!(purged.purged, 12);
    assert!(
        matches!(
            purged.checkpoint,
            Some(rabbit_backoff::dead_letters::CheckpointNote::Written { .. })
        ),
        "{:?}",
        purged.checkpoint
    );
    // No pass needed: the empty checkpoint stands for the purged entries.
    mixed_dead_letters(&channel, &spec, 12..16).await;
    let (dlq, groups) = index_equals_pass_past_a_checkpoint(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 4);
    // An empty checkpoint keeps nothing that a filter would need.
    let filter = DeadLetterFilter::default().error("timeout").unwrap();
    let filtered = dlq.group_report(&filter).await.unwrap();
    assert_eq!(
        filtered.source,
        rabbit_backoff::dead_letters::GroupSource::Index
    );
    assert_eq!(filtered.groups.len(), 1);
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn a_dead_letter_queue_deleted_and_declared_again_leaves_the_index_serving_after_one_pass() {
    let (spec, _cleanup) = declared("heal-redeclare").await;
    let names = spec.names();
    let (connection, channel) = confirm_channel().await;
    mixed_dead_letters(&channel, &spec, 0..30).await;
    channel
        .queue_delete(names.dead_letter_queue.as_str().into(), Default::default())
        .await
        .unwrap();
    rabbit_backoff::topology::declare_topology(
        &*framework_connection().await,
        &Topology::of(&spec),
    )
    .await
    .unwrap();
    mixed_dead_letters(&channel, &spec, 30..40).await;
    let dlq = connect_dlq(&spec).await;
    let (dlq, groups) = heals(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 10);
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

/// A policy set with `rabbitmqctl`, cleared when dropped.
struct Policy(String);

impl Drop for Policy {
    fn drop(&mut self) {
        let _ = common::rabbitmqctl()
            .args(["clear_policy", &self.0])
            .output();
    }
}

#[tokio::test]
async fn a_length_limit_on_the_dead_letter_queue_leaves_the_index_serving_after_one_pass() {
    let (spec, _cleanup) = declared("heal-max-length").await;
    let names = spec.names();
    let policy = Policy(unique("max-length"));
    run_rabbitmqctl(&[
        "set_policy",
        "--apply-to",
        "queues",
        &policy.0,
        &format!("^{}$", names.dead_letter_queue.replace('.', "\\.")),
        r#"{"max-length":20}"#,
    ]);
    let (connection, channel) = confirm_channel().await;
    // The policy takes a moment to reach the queue.
    let deadline = Instant::now() + WAIT;
    loop {
        mixed_dead_letters(&channel, &spec, 0..21).await;
        let depth = channel
            .queue_declare(
                names.dead_letter_queue.as_str().into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
            .message_count();
        if depth == 20 {
            break;
        }
        assert!(Instant::now() < deadline, "the length limit never applied");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Dropped heads: the index counts more than the queue holds.
    mixed_dead_letters(&channel, &spec, 21..30).await;
    let dlq = connect_dlq(&spec).await;
    let (dlq, groups) = heals(dlq).await;
    assert_eq!(groups.iter().map(|g| g.count).sum::<usize>(), 20);
    dlq.close().await;
    drop(policy);
    let _ = connection.close(200, "".into()).await;
}

/// The broker's own dead-lettering (rejects without requeue, expiries) is
/// not written to the index by RabbitMQ 3.10 (see above): one pass leaves a
/// checkpoint that counts those dead letters, and the index serves again.
/// RabbitMQ 4.x indexes them, but writes the stream apart from the queue:
/// a read right after the queue holds them can find the index one behind
/// (seen under CI's load). Such a read says so and reads a pass that
/// leaves a checkpoint; should the late entry land after that checkpoint's
/// offset, it counts twice and the next read's pass puts that right. The
/// index answers again within a few reads. (That 4.x indexes them at all
/// is `broker_versions::dead_letters_the_broker_makes_reach_the_index_on_4_x`.)
#[tokio::test]
async fn the_brokers_own_dead_letters_leave_the_index_serving_after_one_pass() {
    use rabbit_backoff::dead_letters::{GroupSource, IndexFallback};
    let (spec, _cleanup) = declared("heal-broker-dlx").await;
    let names = spec.names();
    let (connection, channel) = confirm_channel().await;
    mixed_dead_letters(&channel, &spec, 0..6).await;
    // Two expire in the work queue, three are rejected.
    broker_dead_letters(&channel, &names.queue, 2, 3).await;
    eventually_depth(&channel, &names.dead_letter_queue, 11).await;
    let dlq = connect_dlq(&spec).await;
    let all = DeadLetterFilter::default();
    let first = dlq.group_report(&all).await.unwrap();
    let (dlq, groups) = if common::broker_version() < (3, 11) {
        // Not indexed: one pass heals the index.
        healed(dlq, first).await
    } else {
        // Indexed by the broker, at once or a moment later.
        let deadline = Instant::now() + WAIT;
        let mut report = first;
        while report.source != GroupSource::Index {
            assert!(
                matches!(report.fallback, Some(IndexFallback::CountMismatch { .. })),
                "only an index out of step may be passed over: {}",
                report.reason()
            );
            assert!(
                Instant::now() < deadline,
                "the index never caught up: {}",
                report.reason()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            report = dlq.group_report(&all).await.unwrap();
        }
        (dlq, report.groups)
    };
    assert_eq!(
        groups.iter().map(|g| g.count).sum::<usize>(),
        11,
        "{groups:?}"
    );
    assert_eq!(
        groups.iter().find(|g| g.reason == "-").map(|g| g.count),
        Some(5),
        "{groups:?}"
    );
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn the_in_memory_broker_purges_without_an_index() {
    let (broker, spec) = in_memory_dead_letters("in-memory-purge", 0..3).await;
    let dlq = Dlq::with_transport(broker.clone(), &spec).await.unwrap();
    let report = dlq.purge().await.unwrap();
    assert_eq!(report.purged, 3);
    assert_eq!(report.checkpoint, None);
    let groups = all_groups(&dlq).await;
    assert_eq!(groups.reason(), "no index");
    assert!(groups.groups.is_empty());
    dlq.close().await;
}
