//! The topology a run declares and deletes: the framework's, or the
//! article's declared with plain lapin calls.

use lapin::Connection;
use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff::topology::Topology;
use rabbit_backoff::{QueueType, RetryBackend};
use rabbit_backoff_core::ConsumerSpec;
use rabbit_backoff_test_support::declare::{self, text};

use crate::names::Names;
use crate::side::Side;
use crate::target::{Target, closed, connect};

/// Declares the topology `side` runs on: the framework's with the
/// framework's own connection, or the article's with plain lapin calls.
pub(crate) async fn declare(target: &Target, spec: &ConsumerSpec, names: &Names, side: Side) {
    if side.is_framework() {
        declare_framework(target, spec, side).await;
    } else {
        declare_article(target, spec, names, side).await;
    }
}

/// The framework's topology, as a consumer of `spec` declares it (the
/// dead-letter index included, unless `spec` turns it off).
pub(crate) async fn declare_framework(target: &Target, spec: &ConsumerSpec, side: Side) {
    let connection = rabbit_backoff::connect(target.first_node())
        .await
        .expect("connect");
    if side == Side::FrameworkDelayed {
        assert_eq!(
            (spec.effective_queue_type(), spec.retry),
            (QueueType::Quorum, RetryBackend::Delayed),
            "the framework-delayed side needs a quorum target (BENCH_TARGETS=single-quorum) on RabbitMQ 4.3"
        );
    }
    if matches!(
        side,
        Side::FrameworkScheduled | Side::FrameworkScheduledUnindexed
    ) {
        assert_eq!(
            (spec.effective_queue_type(), spec.retry),
            (QueueType::Quorum, RetryBackend::Scheduled),
            "the framework-scheduled sides need a quorum target (BENCH_TARGETS=single-quorum) on RabbitMQ 4.3"
        );
    }
    let topology = Topology::of(spec);
    rabbit_backoff::topology::declare_topology(&*connection, &topology)
        .await
        .expect("declare");
    // The index's streams too, as a service's first start left them: its
    // writer declares them again in the run (which changes nothing), so
    // that a run does not pay the broker for creating two streams, which
    // a service pays once, and the article's topology is not charged for.
    if topology.index_feed().is_some() {
        declare::index_streams(&*connection, &topology).await;
    }
    connection.close().await;
}

/// The article's topology under the names of [`Names::article`], declared
/// as a hand-written consumer's set-up declares it: durable direct
/// exchanges, durable queues, the article's arguments, no index. For the
/// `delayed` side, no retry tiers and 4.3's delayed retries on the work
/// queue.
pub(crate) async fn declare_article(
    target: &Target,
    spec: &ConsumerSpec,
    names: &Names,
    side: Side,
) {
    let quorum = spec.effective_queue_type() == QueueType::Quorum;
    // On a quorum target every queue is a quorum queue, as the framework's.
    let queue_type = |arguments: &mut FieldTable| {
        if quorum {
            arguments.insert("x-queue-type".into(), text("quorum"));
        }
    };
    let connection = connect(target).await;
    let channel = connection.create_channel().await.expect("channel");
    for exchange in &names.exchanges {
        declare::exchange(&channel, exchange, lapin::ExchangeKind::Direct).await;
    }
    // The article's work queue dead-letters to its dead-letter exchange.
    let mut work = FieldTable::default();
    work.insert("x-dead-letter-exchange".into(), text(&names.dlx));
    work.insert("x-dead-letter-routing-key".into(), text(&names.dlq_key));
    queue_type(&mut work);
    if quorum {
        // The one argument the framework adds to a quorum work queue that a
        // careful user adds too: an explicit delivery limit, the same as the
        // framework's (20), so that a message redelivered forever (a handler
        // that kills the process) is dead-lettered on every version, not
        // only from 4.0, whose default it is. The retry queues keep the
        // article's arguments: no `x-dead-letter-strategy = at-least-once`
        // and `x-overflow = reject-publish`, which the framework adds to its
        // own and a user copying the article does not know to.
        work.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongInt(i32::try_from(spec.delivery_limit).expect("a delivery limit")),
        );
    }
    if side == Side::Delayed {
        assert_eq!(
            spec.effective_queue_type(),
            QueueType::Quorum,
            "the delayed side needs a quorum target (BENCH_TARGETS=single-quorum) on RabbitMQ 4.3"
        );
        let delay = i64::try_from(spec.delays.as_millis()[0]).expect("a delay in range");
        work.insert("x-delayed-retry-type".into(), text("failed"));
        work.insert("x-delayed-retry-min".into(), AMQPValue::LongLongInt(delay));
        work.insert("x-delayed-retry-max".into(), AMQPValue::LongLongInt(delay));
    }
    if side == Side::Amqp1Loop {
        assert!(
            quorum,
            "the amqp1-loop side needs a quorum target (BENCH_TARGETS=single-quorum) on RabbitMQ 4.3"
        );
        // The work queue a careful user of 4.3's held-back retries declares
        // (docs/amqp-1.0.md): dead letters the queue moves itself (a
        // delivery limit reached) are not dropped, nor is a publish
        // beyond its length. `x-delivery-limit` (above) is over the one
        // retry of the schedule: each `modified` retry counts as a failed
        // delivery.
        work.insert("x-dead-letter-strategy".into(), text("at-least-once"));
        work.insert("x-overflow".into(), text("reject-publish"));
    }
    let mut queues = vec![(names.work_queue.clone(), work)];
    for (ms, queue) in &names.retry_queues {
        // An expired retry returns through the work exchange.
        let mut retry = FieldTable::default();
        retry.insert(
            "x-message-ttl".into(),
            AMQPValue::LongInt(i32::try_from(*ms).expect("a delay in range")),
        );
        retry.insert("x-dead-letter-exchange".into(), text(&names.exchange));
        retry.insert("x-dead-letter-routing-key".into(), text(&names.routing_key));
        queue_type(&mut retry);
        queues.push((queue.clone(), retry));
    }
    let mut dead = FieldTable::default();
    queue_type(&mut dead);
    queues.push((names.dlq.clone(), dead));
    for (queue, arguments) in queues {
        declare::queue(&channel, &queue, arguments).await;
    }
    let mut bindings = vec![(&names.work_queue, &names.exchange, &names.routing_key)];
    bindings.extend(
        names
            .retry_queues
            .iter()
            .map(|(_, queue)| (queue, &names.retry_exchange, queue)),
    );
    bindings.push((&names.dlq, &names.dlx, &names.dlq_key));
    for (queue, exchange, key) in bindings {
        declare::bind(&channel, queue, exchange, key).await;
    }
    closed(channel.close(200, "".into())).await;
    closed(connection.close(200, "".into())).await;
}

/// Deletes every queue and exchange of `names`: what the run declared,
/// on either topology.
pub(crate) async fn delete(connection: &Connection, names: &Names) {
    let channel = connection.create_channel().await.expect("channel");
    for queue in &names.queues {
        let _ = channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    for exchange in &names.exchanges {
        let _ = channel
            .exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
            .await;
    }
    closed(channel.close(200, "".into())).await;
}
