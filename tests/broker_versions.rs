//! What differs between the RabbitMQ versions users run (3.10, 4.0, 4.3),
//! asserted on the broker at hand: each test reads the broker's version and
//! checks that version's behaviour, so that the same suite holds on every
//! one (scripts/test.sh runs it on 3.10 and 4.3, and on 4.0).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use lapin::options::{
    BasicConsumeOptions, BasicNackOptions, BasicQosOptions, BasicRejectOptions,
    ConfirmSelectOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection};
use rabbit_backoff::QueueType;
use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, GroupSource};
use rabbit_backoff::dedupe::{Claim, ClaimRequest, DedupeStore, MemoryStore, StoreError};
use rabbit_backoff::prelude::*;
use rabbit_backoff::topology::Topology;
use rabbit_backoff_test_support::declare::{arguments, text};

use common::*;

const WAIT: Duration = Duration::from_secs(30);

/// A quorum queue `name` with a delivery limit of `limit`, dead-lettering
/// into `<name>.dlq` through `<name>.dlx`; the cleanup deletes all three.
async fn limited_quorum_queue(channel: &Channel, name: &str, limit: i64) -> Cleanup {
    let (dlx, dlq) = (format!("{name}.dlx"), format!("{name}.dlq"));
    let cleanup = Cleanup::default().queue(name).queue(&dlq).exchange(&dlx);
    declare::exchange(channel, &dlx, lapin::ExchangeKind::Direct).await;
    declare::queue(channel, &dlq, FieldTable::default()).await;
    declare::bind(channel, &dlq, &dlx, "dead").await;
    declare::queue(
        channel,
        name,
        arguments(&[
            ("x-queue-type", text("quorum")),
            ("x-dead-letter-exchange", text(&dlx)),
            ("x-dead-letter-routing-key", text("dead")),
            ("x-delivery-limit", AMQPValue::LongLongInt(limit)),
        ]),
    )
    .await;
    cleanup
}

async fn publish_confirmed(channel: &Channel, queue: &str, body: &[u8]) {
    publish(
        channel,
        "",
        queue,
        body,
        BasicProperties::default().with_delivery_mode(2),
    )
    .await;
}

/// How a consumer gives a delivery back.
#[derive(Clone, Copy, Debug)]
enum GiveBack {
    Nack,
    Reject,
}

/// Consumes one message from `queue` and gives it back `times` times, then
/// acks it; returns how many deliveries came (fewer when the broker
/// dead-lettered it) and the headers `x-delivery-count` and
/// `x-acquired-count` of the last one.
async fn give_back(
    channel: &Channel,
    queue: &str,
    how: GiveBack,
    times: u32,
) -> (u32, Option<i64>, Option<i64>) {
    channel
        .basic_qos(1, BasicQosOptions::default())
        .await
        .unwrap();
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let (mut deliveries, mut counts) = (0, (None, None));
    while let Ok(Some(delivery)) =
        tokio::time::timeout(Duration::from_secs(2), consumer.next()).await
    {
        let delivery = delivery.unwrap();
        deliveries += 1;
        counts = (
            header_int(&delivery.properties, "x-delivery-count"),
            header_int(&delivery.properties, "x-acquired-count"),
        );
        if deliveries > times {
            delivery.ack(Default::default()).await.unwrap();
            break;
        }
        match how {
            GiveBack::Nack => delivery
                .nack(BasicNackOptions {
                    requeue: true,
                    ..Default::default()
                })
                .await
                .unwrap(),
            GiveBack::Reject => delivery
                .reject(BasicRejectOptions { requeue: true })
                .await
                .unwrap(),
        };
    }
    (deliveries, counts.0, counts.1)
}

/// RabbitMQ 4.3 split the quorum delivery count: `x-delivery-count` counts
/// only failed deliveries (reject with requeue), `x-acquired-count` every
/// one, and the delivery limit is checked against the first, so a
/// `nack(requeue = true)` no longer uses up the limit. Before 4.3 both count.
#[tokio::test]
async fn the_quorum_delivery_limit_counts_a_requeueing_nack_before_4_3_only() {
    let (connection, channel) = channel().await;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let version = broker_version();
    for how in [GiveBack::Nack, GiveBack::Reject] {
        let queue = unique("limit");
        let _cleanup = limited_quorum_queue(&channel, &queue, 3).await;
        publish_confirmed(&channel, &queue, b"x").await;
        let probe = connection.create_channel().await.unwrap();
        let (deliveries, delivery_count, acquired_count) = give_back(&probe, &queue, how, 8).await;
        let _ = probe.close(200, "".into()).await;
        let dead_lettered = depth(&channel, &format!("{queue}.dlq")).await;
        println!(
            "RabbitMQ {version:?}, {how:?}: {deliveries} deliveries, x-delivery-count {delivery_count:?}, x-acquired-count {acquired_count:?}, dead-lettered {dead_lettered}"
        );
        match (how, version >= (4, 3)) {
            (GiveBack::Nack, true) => {
                assert_eq!(deliveries, 9, "every nack is redelivered past the limit");
                assert_eq!(dead_lettered, 0);
                assert_eq!(delivery_count, None, "a nack is no failed delivery");
                assert_eq!(acquired_count, Some(8), "but it is acquired again");
            }
            _ => {
                assert_eq!(
                    deliveries, 4,
                    "the limit of 3 ends the message at the 4th delivery"
                );
                assert_eq!(dead_lettered, 1, "and the broker dead-letters it");
                assert_eq!(delivery_count, Some(3));
            }
        }
    }
    let _ = connection.close(200, "".into()).await;
}

/// A consumer spec on a unique quorum work queue.
fn quorum_spec(name: &str, limit: u32) -> ConsumerSpec {
    let mut spec = process_job.spec();
    spec.queue = unique(name);
    spec.queue_type = Some(QueueType::Quorum);
    spec.delivery_limit = limit;
    spec
}

/// Declares `topology` as a consumer would, then opens a confirm channel on
/// the test broker; the cleanup deletes what `spec` declares.
async fn declared(spec: &ConsumerSpec, topology: &Topology) -> (Cleanup, Connection, Channel) {
    let cleanup = Cleanup::of(spec);
    rabbit_backoff::topology::declare_topology(&*framework_connection().await, topology)
        .await
        .unwrap();
    let (connection, channel) = channel().await;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    (cleanup, connection, channel)
}

/// The framework's rejections without requeue (messages no copy can be
/// made of) are `basic.nack(requeue = false)`, which 4.3 maps to a
/// `modify` with `undeliverable-here`: the quorum work queue must still
/// dead-letter them into the framework's dead-letter queue.
#[tokio::test]
async fn a_quorum_work_queue_dead_letters_a_nack_without_requeue() {
    let spec = quorum_spec("nack-false", 20);
    let (_cleanup, connection, channel) = declared(&spec, &Topology::of(&spec)).await;
    publish_confirmed(&channel, &spec.queue, b"{}").await;
    let delivery = loop {
        if let Some(message) = channel
            .basic_get(spec.queue.as_str().into(), Default::default())
            .await
            .unwrap()
        {
            break message;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    delivery
        .nack(BasicNackOptions {
            requeue: false,
            ..Default::default()
        })
        .await
        .unwrap();
    let names = spec.names();
    let dead = next_message(&channel, &names.dead_letter_queue, WAIT).await;
    assert_eq!(dead.data, b"{}");
    assert_eq!(
        header_str(&dead.properties, "x-first-death-reason").as_deref(),
        Some("rejected")
    );
    assert_eq!(depth(&channel, &spec.queue).await, 0);
    let _ = connection.close(200, "".into()).await;
}

/// A dedupe store whose first `busy` claims answer that another delivery
/// holds the key, and whose next `down` claims fail, before it answers as
/// a memory store: every one of those deliveries is requeued after a pause.
struct Reluctant {
    busy: AtomicU32,
    down: AtomicU32,
    claims: AtomicU32,
    store: MemoryStore,
}

impl DedupeStore for Reluctant {
    fn claim<'a>(&'a self, request: ClaimRequest<'a>) -> BoxFuture<'a, Result<Claim, StoreError>> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        let take = |n: &AtomicU32| {
            n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
                .is_ok()
        };
        if take(&self.busy) {
            return Box::pin(async { Ok(Claim::InProgress) });
        }
        if take(&self.down) {
            return Box::pin(async {
                Err(StoreError::Unavailable {
                    store: "reluctant".to_owned(),
                    action: "a claim",
                    reason: "not now".to_owned(),
                })
            });
        }
        self.store.claim(request)
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }

    fn describe(&self) -> String {
        "reluctant".to_owned()
    }
}

/// A message that did not fail is never dead-lettered, however often the
/// runtime gives it back (a key another delivery holds, a store that does
/// not answer): on a quorum work queue a requeueing nack uses up the
/// delivery limit before RabbitMQ 4.3, so the runtime returns such a
/// message as a confirmed copy at the back of the queue instead.
#[tokio::test]
async fn a_message_requeued_past_the_delivery_limit_is_never_dead_lettered() {
    let store = Arc::new(Reluctant {
        busy: AtomicU32::new(3),
        down: AtomicU32::new(2),
        claims: AtomicU32::new(0),
        store: MemoryStore::new(),
    });
    let queue = unique("requeued");
    let journal = Journal::default();
    let running = test_runtime(journal.clone())
        .dedupe_store(Arc::clone(&store))
        .consumer_with(process_job, |spec| {
            spec.queue = queue.clone();
            spec.queue_type = Some(QueueType::Quorum);
            spec.delivery_limit = 2;
            spec.dedupe = Some(rabbit_backoff::Dedupe::new(Duration::from_secs(60)));
        })
        .start()
        .await
        .expect("the runtime starts");
    let mut spec = process_job.spec();
    spec.queue = queue.clone();
    spec.queue_type = Some(QueueType::Quorum);
    let _cleanup = Cleanup::of(&spec);
    let publisher = publisher().await;
    let job = Job::new(1, Fail::None, None);
    let message = Outgoing::json(&job).unwrap().message_id("job-1");
    let names = spec.names();
    publisher
        .publish(&names.exchange, &names.routing_key, message)
        .await
        .unwrap();
    eventually("the job handled", WAIT, || !journal.calls_for(1).is_empty()).await;
    // Let anything late arrive.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (connection, channel) = channel().await;
    assert_eq!(store.claims.load(Ordering::SeqCst), 6, "5 requeues, 1 run");
    assert_eq!(journal.calls_for(1).len(), 1, "handled once");
    assert_eq!(
        depth(&channel, &names.dead_letter_queue).await,
        0,
        "nothing dead-lettered"
    );
    assert_eq!(depth(&channel, &queue).await, 0);
    let _ = connection.close(200, "".into()).await;
    running.stop().await.unwrap();
}

/// Dead letters the broker makes itself (a TTL that runs out in the work
/// queue, a rejection without requeue) reach the dead-letter queue without
/// an entry in the index: no stream is bound to the dead-letter exchange,
/// on any version. The count check finds them: the first read is a pass,
/// which leaves a checkpoint, and the next is from the index. (Before,
/// the stream was bound beside a classic queue and RabbitMQ 4.x wrote them
/// to it, while 3.10 dropped them there.)
#[tokio::test]
async fn dead_letters_the_broker_makes_are_found_by_the_count_check() {
    let mut spec = process_job.spec();
    spec.queue = unique("broker-dl");
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    let topology = Topology::of(&spec);
    assert!(topology.index_feed().is_some());
    let (_cleanup, connection, channel) = declared(&spec, &topology).await;
    rabbit_backoff_test_support::declare::index_streams(&*framework_connection().await, &topology)
        .await;
    // Two that expire in the work queue...
    for id in 0..2 {
        publish(
            &channel,
            "",
            &spec.queue,
            format!("{{\"id\":{id}}}").as_bytes(),
            BasicProperties::default()
                .with_delivery_mode(2)
                .with_expiration("1".into()),
        )
        .await;
    }
    // ...and one rejected without requeue.
    publish_confirmed(&channel, &spec.queue, b"{\"id\":2}").await;
    let names = spec.names();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(message) = channel
            .basic_get(spec.queue.as_str().into(), Default::default())
            .await
            .unwrap()
        {
            message
                .nack(BasicNackOptions {
                    requeue: false,
                    ..Default::default()
                })
                .await
                .unwrap();
        }
        if depth(&channel, &names.dead_letter_queue).await >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the broker dead-lettered 3 messages"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let dlq = Dlq::connect(&url(), &spec).await.unwrap();
    let report = dlq
        .group_report(&DeadLetterFilter::default())
        .await
        .unwrap();
    let total: usize = report.groups.iter().map(|g| g.count).sum();
    assert_eq!(total, 3, "{report:?}");
    assert_eq!(
        report.source,
        GroupSource::Pass,
        "RabbitMQ {:?}: {}",
        broker_version(),
        report.reason()
    );
    assert_eq!(
        report.fallback,
        Some(rabbit_backoff::dead_letters::IndexFallback::CountMismatch {
            indexed: 0,
            depth: 3
        })
    );
    let healed = dlq
        .group_report(&DeadLetterFilter::default())
        .await
        .unwrap();
    assert_eq!(healed.source, GroupSource::Index, "{}", healed.reason());
    assert_eq!(healed.groups, report.groups);
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

/// Whether `queue` exists: a passive declaration on a channel of its own
/// (a refused one closes its channel).
async fn queue_exists(connection: &Connection, queue: impl AsRef<str>) -> bool {
    let passive = connection.create_channel().await.unwrap();
    let declared = declare::try_passive(&passive, queue.as_ref()).await;
    let _ = passive.close(200, "".into()).await;
    declared.is_ok()
}

/// Waits until the entries stream `stream` holds `n` entries (a batch of
/// them in one message, or one whole dead letter), read from its start on
/// a channel of its own. The markers a read of the index leaves in the
/// stream are not entries: counting them would end the wait before the
/// writer's next batch (which waits up to 50 ms for more) is there.
async fn stream_holds(connection: &Connection, stream: &str, n: usize) {
    let channel = connection.create_channel().await.unwrap();
    channel
        .basic_qos(100, BasicQosOptions::default())
        .await
        .unwrap();
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-stream-offset".into(),
        AMQPValue::LongString("first".into()),
    );
    let mut consumer = channel
        .basic_consume(
            stream.into(),
            "".into(),
            BasicConsumeOptions::default(),
            arguments,
        )
        .await
        .unwrap();
    let mut seen = 0;
    while seen < n {
        let next = tokio::time::timeout(WAIT, consumer.next())
            .await
            .unwrap_or_else(|_| panic!("{stream} held {seen} messages, not {n}"));
        let delivery = next.expect("the stream's consumer ends").unwrap();
        delivery.ack(Default::default()).await.unwrap();
        let marker = rabbit_backoff_core::headers::INDEX_MARKER;
        if header(&delivery.properties, marker).is_some() {
            continue;
        }
        let batch = rabbit_backoff_core::IndexBatch::CONTENT_TYPE;
        seen += match delivery.properties.content_type() {
            Some(t) if t.as_str() == batch => {
                rabbit_backoff_core::IndexBatch::decode(&delivery.data)
                    .unwrap()
                    .entries
                    .len()
            }
            _ => 1,
        };
    }
    let _ = channel.close(200, "".into()).await;
}

/// A quorum consumer writes its dead-letter index itself
/// (`IndexFeed::Written`): the index's stream is bound to nothing, so a
/// dead letter never waits on the stream coordinator; the consumer writes
/// each dead letter it made to the stream once confirmed, and `dlq groups`
/// answers from the index. A binding an earlier version left is removed,
/// and a dead letter the broker makes (no entry) sends the next read to the
/// queue once, whose checkpoint heals the index.
#[tokio::test]
async fn a_quorum_consumer_writes_its_index_and_groups_from_it() {
    use rabbit_backoff::topology::IndexFeed;
    let queue = unique("quorum-index");
    let mut spec = quorum_spec("quorum-index", 20);
    spec.queue = queue.clone();
    let topology = Topology::of(&spec);
    assert_eq!(topology.index_feed(), Some(IndexFeed::Written));
    let names = spec.names();
    // What an earlier version declared: the entries stream bound to the
    // dead-letter exchange.
    let (_cleanup, connection, channel) = declared(&spec, &topology).await;
    let index = &topology.dead_letter_index;
    let framework = framework_connection().await;
    let earlier = framework.open_channel().await.unwrap();
    for stream in index.queues() {
        earlier.declare_queue(stream).await.unwrap();
    }
    let binding = &index.binding;
    earlier.bind_queue(binding).await.unwrap();
    earlier.close().await;

    let running = Running::start("quorum-index", |s| {
        s.queue = queue.clone();
        s.queue_type = Some(QueueType::Quorum);
    })
    .await;
    // The runtime's index writer removes the old binding as it starts, on
    // a connection of its own: wait until it has.
    let bound = || {
        let listed = rabbitmqctl()
            .args(["-q", "list_bindings", "source_name", "destination_name"])
            .output()
            .expect("rabbitmqctl runs");
        String::from_utf8_lossy(&listed.stdout)
            .lines()
            .any(|line| line.contains(&binding.exchange) && line.contains(&binding.queue))
    };
    eventually("the old binding removed", WAIT, || !bound()).await;
    let publisher = publisher().await;
    for id in 0..3 {
        running
            .publish(&publisher, &Job::new(id, Fail::Permanent, None))
            .await;
    }
    // The consumer's three dead letters reach the stream, written by it.
    stream_holds(&connection, &names.dead_letter_index(), 3).await;

    // The binding is gone: a message published to the dead-letter exchange
    // reaches the queue only.
    publish_to(
        &channel,
        &names.dead_letter_exchange,
        &names.dead_letter_routing_key,
    )
    .await;
    let dlq = Dlq::connect(&url(), &spec).await.unwrap();
    let report = dlq
        .group_report(&DeadLetterFilter::default())
        .await
        .unwrap();
    assert_eq!(
        report.source,
        GroupSource::Pass,
        "a dead letter without an entry is found by the count check: {}",
        report.reason()
    );
    assert_eq!(report.groups.iter().map(|g| g.count).sum::<usize>(), 4);

    // Healed: the next read comes from the index, with every dead letter.
    running
        .publish(&publisher, &Job::new(3, Fail::Permanent, None))
        .await;
    stream_holds(&connection, &names.dead_letter_index(), 4).await;
    let report = dlq
        .group_report(&DeadLetterFilter::default())
        .await
        .unwrap();
    assert_eq!(report.source, GroupSource::Index, "{}", report.reason());
    assert_eq!(report.groups.iter().map(|g| g.count).sum::<usize>(), 5);
    dlq.close().await;
    publisher.close().await;
    running.stop().await;
    let _ = connection.close(200, "".into()).await;
}

/// Publishes a message to `exchange` with `key`, confirmed.
async fn publish_to(channel: &Channel, exchange: &str, key: &str) {
    publish(
        channel,
        exchange,
        key,
        b"{\"id\":99}",
        BasicProperties::default(),
    )
    .await;
}

/// `dead_letter_index = "off"` declares no index, and removes the one an
/// earlier declaration of the same consumer left: the broker writes each
/// dead letter once, and `dlq groups` reads the queue, saying why, instead
/// of a summary that stopped following it.
#[tokio::test]
async fn a_consumer_with_the_index_off_removes_the_old_one_and_groups_from_a_pass() {
    let mut spec = process_job.spec();
    spec.queue = unique("index-off");
    spec.queue_type = Some(rabbit_backoff::QueueType::Classic);
    let (_cleanup, connection, channel) = declared(&spec, &Topology::of(&spec)).await;
    rabbit_backoff_test_support::declare::index_streams(
        &*framework_connection().await,
        &Topology::of(&spec),
    )
    .await;
    let names = spec.names();
    let index_exists = || queue_exists(&connection, names.dead_letter_index());
    assert!(index_exists().await, "declared with the index on");

    spec.dead_letter_index = rabbit_backoff::DeadLetterIndex::Off;
    let topology = Topology::of(&spec);
    assert_eq!(topology.index_feed(), None);
    rabbit_backoff::topology::declare_topology(&*framework_connection().await, &topology)
        .await
        .unwrap();
    assert!(!index_exists().await, "the old index is deleted");
    // Declaring again, with nothing left to delete, is fine.
    rabbit_backoff::topology::declare_topology(&*framework_connection().await, &topology)
        .await
        .unwrap();

    publish_confirmed(&channel, &names.dead_letter_queue, b"{\"id\":1}").await;
    let dlq = Dlq::connect(&url(), &spec).await.unwrap();
    let report = dlq
        .group_report(&DeadLetterFilter::default())
        .await
        .unwrap();
    assert_eq!(report.source, GroupSource::Pass, "{}", report.reason());
    assert_eq!(report.groups.iter().map(|g| g.count).sum::<usize>(), 1);
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}
