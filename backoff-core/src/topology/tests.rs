use super::arguments as arg;
use super::*;
use crate::{ConsumerSpec, ExchangeKind, QueueType, RetryReturn};

fn s(v: &str) -> Argument {
    Argument::Str(v.to_owned())
}

fn spec() -> ConsumerSpec {
    ConsumerSpec::new("orders", "5s,15s,60s".parse().unwrap())
}

#[test]
fn delayed_retries_declare_no_retry_queue_and_set_the_work_queues_arguments() {
    let mut spec = ConsumerSpec::new("orders", "2s,4s,6s".parse().unwrap());
    spec.queue_type = Some(QueueType::Quorum);
    spec.retry = crate::RetryBackend::Delayed;
    let t = Topology::of(&spec);
    assert!(t.retry_queues.is_empty());
    assert_eq!(t.queues().count(), 2, "the dead-letter and work queues");
    assert!(
        t.bindings
            .iter()
            .all(|b| b.exchange != t.retry_exchange.name)
    );
    let work = &t.work_queue;
    assert_eq!(
        work.argument("x-delayed-retry-type"),
        Some(&Argument::Str("failed".into()))
    );
    assert_eq!(
        work.argument("x-delayed-retry-min"),
        Some(&Argument::Int(2_000))
    );
    assert_eq!(
        work.argument("x-delayed-retry-max"),
        Some(&Argument::Int(6_000))
    );
    assert_eq!(work.argument("x-delivery-limit"), Some(&Argument::Int(20)));
    spec.retry = crate::RetryBackend::Tiers;
    assert_eq!(
        Topology::of(&spec)
            .work_queue
            .argument("x-delayed-retry-min"),
        None
    );
}

#[test]
fn classic_topology_matches_the_design() {
    let mut spec = spec();
    spec.queue_type = Some(QueueType::Classic);
    let t = Topology::of(&spec);
    assert_eq!(
        t.work_exchange,
        ExchangeDecl {
            name: "orders".into(),
            kind: ExchangeKind::Direct
        }
    );
    assert_eq!(
        t.work_queue.argument("x-dead-letter-exchange"),
        Some(&s("orders.dlx"))
    );
    assert_eq!(
        t.work_queue.argument("x-dead-letter-routing-key"),
        Some(&s("orders.dlq"))
    );
    // Named even when nothing named it: a vhost's default type would
    // otherwise decide (RabbitMQ 3.10 and later).
    for q in t.queues() {
        assert_eq!(
            q.argument("x-queue-type"),
            Some(&s("classic")),
            "{}",
            q.name
        );
    }
    let names: Vec<_> = t.retry_queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "orders.retry_5000ms",
            "orders.retry_15000ms",
            "orders.retry_60000ms"
        ]
    );
    assert_eq!(
        t.retry_queues[2].argument("x-message-ttl"),
        Some(&Argument::Int(60_000))
    );
    assert_eq!(
        t.dead_letter_queue.arguments,
        [(arg::QUEUE_TYPE.to_owned(), s("classic"))]
    );
    assert_eq!(t.bindings.len(), 5);
    assert!(t.bindings.contains(&Binding {
        queue: "orders.retry_15000ms".into(),
        exchange: "orders.retry".into(),
        routing_key: "orders.retry_15000ms".into(),
    }));
    assert!(t.bindings.contains(&Binding {
        queue: "orders.dlq".into(),
        exchange: "orders.dlx".into(),
        routing_key: "orders.dlq".into(),
    }));
    assert_eq!(t.queues().count(), 5);
}

#[test]
fn quorum_topology_is_at_least_once_with_an_explicit_delivery_limit() {
    let mut spec = spec();
    assert_eq!(spec.queue_type, None, "quorum, the default");
    spec.delivery_limit = 7;
    let t = Topology::of(&spec);
    for q in t.queues() {
        assert_eq!(q.argument("x-queue-type"), Some(&s("quorum")), "{}", q.name);
    }
    assert_eq!(
        t.dead_letter_queue.argument("x-delivery-limit"),
        Some(&Argument::Int(DEAD_LETTER_DELIVERY_LIMIT)),
        "no dead letter dropped for having been returned"
    );
    assert_eq!(t.work_queue.argument("x-queue-type"), Some(&s("quorum")));
    assert_eq!(
        t.work_queue.argument("x-delivery-limit"),
        Some(&Argument::Int(7))
    );
    for q in &t.retry_queues {
        assert_eq!(
            q.argument("x-dead-letter-strategy"),
            Some(&s("at-least-once"))
        );
        assert_eq!(q.argument("x-overflow"), Some(&s("reject-publish")));
    }
}

#[test]
fn differences_name_each_argument_both_ways() {
    let mut spec = spec();
    spec.queue_type = Some(QueueType::Classic);
    let t = Topology::of(&spec);
    let retry = &t.retry_queues[0];
    assert!(retry.differences(&retry.arguments).is_empty());
    let existing = vec![
        (arg::MESSAGE_TTL.to_owned(), Argument::Int(5000)),
        (arg::DEAD_LETTER_EXCHANGE.to_owned(), s("orders")),
        (arg::DEAD_LETTER_ROUTING_KEY.to_owned(), s("orders")),
        (arg::QUEUE_TYPE.to_owned(), s("classic")),
    ];
    assert_eq!(
        retry.differences(&existing),
        vec![ArgumentDifference {
            queue: "orders.retry_5000ms".into(),
            argument: arg::DEAD_LETTER_EXCHANGE.into(),
            expected: Some(s("")),
            actual: Some(s("orders")),
        },]
    );
    // Unset and `classic` are the same queue type; `quorum` is not.
    let quorum = vec![(arg::QUEUE_TYPE.to_owned(), s("quorum"))];
    assert_eq!(retry.differences(&quorum).len(), 4);
    let classic = [
        retry.arguments.clone(),
        vec![(arg::QUEUE_TYPE.to_owned(), s("classic"))],
    ]
    .concat();
    assert!(retry.differences(&classic).is_empty());
}

#[test]
fn the_articles_topology_returns_retries_through_the_work_exchange() {
    let mut spec = ConsumerSpec::new("work_queue", "1ms,10ms".parse().unwrap());
    spec.names.exchange = Some("work_exchange".into());
    spec.names.routing_key = Some("work".into());
    spec.names.retry_exchange = Some("retry_exchange".into());
    spec.names.retry_queue = Some("retry_{ms}ms".into());
    spec.names.dead_letter_exchange = Some("dlx_exchange".into());
    spec.names.dead_letter_queue = Some("dead_letter_queue".into());
    spec.names.dead_letter_routing_key = Some("dead".into());
    spec.retry_return = RetryReturn::Exchange;
    // The article declares classic queues.
    spec.queue_type = Some(QueueType::Classic);
    let t = Topology::of(&spec);
    let retry = &t.retry_queues[0];
    assert_eq!(retry.name, "retry_1ms");
    assert_eq!(
        retry.arguments,
        vec![
            (arg::MESSAGE_TTL.to_owned(), Argument::Int(1)),
            (arg::DEAD_LETTER_EXCHANGE.to_owned(), s("work_exchange")),
            (arg::DEAD_LETTER_ROUTING_KEY.to_owned(), s("work")),
            (arg::QUEUE_TYPE.to_owned(), s("classic")),
        ]
    );
    // Everything else is as with the queue route.
    spec.retry_return = RetryReturn::Queue;
    let q = Topology::of(&spec);
    assert_eq!(q.work_queue, t.work_queue);
    assert_eq!(q.bindings, t.bindings);
    assert_eq!(
        q.retry_queues[1].argument(arg::DEAD_LETTER_EXCHANGE),
        Some(&s(""))
    );
    assert_eq!(
        q.retry_queues[1].argument(arg::DEAD_LETTER_ROUTING_KEY),
        Some(&s("work_queue"))
    );
}
