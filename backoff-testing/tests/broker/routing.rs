//! Routing through each exchange type, and what a missing or mismatched
//! exchange does.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString};
use rabbit_backoff_core::ExchangeKind;

use super::*;
use rabbit_backoff_runtime::transport::{Confirm, Publication};

async fn bound(
    channel: &Arc<dyn Channel>,
    exchange: &str,
    kind: ExchangeKind,
    bindings: &[(&str, &str)],
) {
    channel.declare_exchange(exchange, kind).await.unwrap();
    for (queue, key) in bindings {
        channel
            .bind_queue(&Binding::new(*queue, exchange, *key))
            .await
            .unwrap();
    }
}

async fn send(channel: &Arc<dyn Channel>, exchange: &str, key: &str) -> Confirm {
    channel
        .publish(Publication::new(
            exchange,
            key,
            key.as_bytes(),
            BasicProperties::default(),
        ))
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn direct_routes_on_the_exact_key_to_every_queue_bound_with_it() {
    let (broker, ch) = setup_with(&["q1", "q2"]).await;
    bound(
        &ch,
        "x",
        ExchangeKind::Direct,
        &[("q1", "a"), ("q2", "b"), ("q2", "a")],
    )
    .await;

    assert_eq!(send(&ch, "x", "a").await, Confirm::Ack);
    assert_eq!(send(&ch, "x", "b").await, Confirm::Ack);
    assert_eq!(send(&ch, "x", "c").await, Confirm::Returned);
    assert_eq!(labels(&broker, "q1"), ["a"]);
    assert_eq!(labels(&broker, "q2"), ["a", "b"]);
    assert_eq!(broker.messages("q2")[0].exchange(), "x");
}

#[tokio::test(start_paused = true)]
async fn fanout_ignores_the_key() {
    let (broker, ch) = setup_with(&["q1", "q2"]).await;
    bound(
        &ch,
        "x",
        ExchangeKind::Fanout,
        &[("q1", "whatever"), ("q2", "")],
    )
    .await;

    assert_eq!(send(&ch, "x", "anything").await, Confirm::Ack);
    assert_eq!(labels(&broker, "q1"), ["anything"]);
    assert_eq!(labels(&broker, "q2"), ["anything"]);
}

#[tokio::test(start_paused = true)]
async fn topic_star_is_one_word_and_hash_is_zero_or_more() {
    let (broker, ch) = setup_with(&["one", "many", "eu"]).await;
    bound(
        &ch,
        "events",
        ExchangeKind::Topic,
        &[("one", "orders.*"), ("many", "orders.#"), ("eu", "*.eu")],
    )
    .await;

    for key in ["orders.created", "orders", "orders.created.eu", "x.eu"] {
        assert_eq!(send(&ch, "events", key).await, Confirm::Ack, "{key}");
    }
    assert_eq!(send(&ch, "events", "eu").await, Confirm::Returned);
    assert_eq!(labels(&broker, "one"), ["orders.created"]);
    assert_eq!(
        labels(&broker, "many"),
        ["orders.created", "orders", "orders.created.eu"]
    );
    assert_eq!(labels(&broker, "eu"), ["x.eu"]);
}

#[tokio::test(start_paused = true)]
async fn a_queue_matched_by_two_bindings_gets_one_copy() {
    let (broker, ch) = setup_with(&["q"]).await;
    bound(&ch, "t", ExchangeKind::Topic, &[("q", "a.*"), ("q", "#")]).await;

    assert_eq!(send(&ch, "t", "a.b").await, Confirm::Ack);
    assert_eq!(broker.queue_depth("q"), 1);
}

#[tokio::test(start_paused = true)]
async fn headers_exchange_with_no_binding_arguments_matches_every_message() {
    let (broker, ch) = setup_with(&["q"]).await;
    bound(&ch, "h", ExchangeKind::Headers, &[("q", "ignored")]).await;

    let mut headers = FieldTable::default();
    headers.insert(
        "region".into(),
        AMQPValue::LongString(LongString::from("eu")),
    );
    let with = BasicProperties::default().with_headers(headers);
    assert_eq!(
        ch.publish(Publication::new("h", "k", b"with", with))
            .await
            .unwrap(),
        Confirm::Ack
    );
    assert_eq!(send(&ch, "h", "without").await, Confirm::Ack);
    assert_eq!(labels(&broker, "q"), ["with", "without"]);
}

#[tokio::test(start_paused = true)]
async fn the_default_exchange_routes_to_the_queue_named_by_the_key() {
    let (broker, ch) = setup_with(&["orders"]).await;

    assert_eq!(send(&ch, "", "orders").await, Confirm::Ack);
    assert_eq!(send(&ch, "", "nobody").await, Confirm::Returned);
    assert_eq!(labels(&broker, "orders"), ["orders"]);
    assert_eq!(broker.messages("orders")[0].routing_key(), "orders");
}

#[tokio::test(start_paused = true)]
async fn publishing_to_a_missing_exchange_closes_the_channel_with_not_found() {
    let (broker, ch) = setup_with(&["q"]).await;

    let (code, text) = refusal(
        ch.publish(Publication::new(
            "nope",
            "k",
            b"x",
            BasicProperties::default(),
        ))
        .await,
    );
    assert_eq!(code, 404);
    assert_eq!(text, "NOT_FOUND - no exchange 'nope' in vhost '/'");
    // The channel is closed: every later call fails with the same error.
    assert_eq!(
        refusal(ch.check_queue("q").await),
        (
            404,
            "NOT_FOUND - no exchange 'nope' in vhost '/'".to_owned()
        )
    );
    // Another channel works.
    let other = open(&broker).await;
    assert!(other.check_queue("q").await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn redeclaring_an_exchange_with_another_type_is_refused_and_closes_the_channel() {
    let (_broker, ch) = setup().await;
    ch.declare_exchange("x", ExchangeKind::Direct)
        .await
        .unwrap();
    ch.declare_exchange("x", ExchangeKind::Direct)
        .await
        .unwrap();

    let (code, text) = refusal(ch.declare_exchange("x", ExchangeKind::Fanout).await);
    assert_eq!(code, 406);
    assert_eq!(
        text,
        "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'"
    );
    assert_eq!(refusal(ch.check_exchange("x").await).1, text);
}

#[tokio::test(start_paused = true)]
async fn the_default_and_amq_exchanges_are_reserved() {
    let (broker, ch) = setup().await;
    let (code, text) = refusal(ch.declare_exchange("", ExchangeKind::Direct).await);
    assert_eq!(
        (code, text.as_str()),
        (
            403,
            "ACCESS_REFUSED - operation not permitted on the default exchange"
        )
    );
    let ch = open(&broker).await;
    let (code, text) = refusal(ch.declare_exchange("amq.mine", ExchangeKind::Topic).await);
    assert_eq!(
        (code, text.as_str()),
        (
            403,
            "ACCESS_REFUSED - exchange name 'amq.mine' contains reserved prefix 'amq.*'"
        )
    );
    let ch = open(&broker).await;
    ch.declare_exchange("amq.topic", ExchangeKind::Topic)
        .await
        .unwrap();
    declare_plain(&ch, "q").await;
    assert_eq!(
        refusal(ch.bind_queue(&Binding::new("q", "", "q")).await).0,
        403
    );
}

#[tokio::test(start_paused = true)]
async fn binding_needs_both_ends() {
    let (broker, ch) = setup().await;
    ch.declare_exchange("x", ExchangeKind::Direct)
        .await
        .unwrap();
    assert_eq!(
        refusal(ch.bind_queue(&Binding::new("ghost", "x", "k")).await),
        (404, "NOT_FOUND - no queue 'ghost' in vhost '/'".to_owned())
    );
    let ch = open(&broker).await;
    declare_plain(&ch, "q").await;
    assert_eq!(
        refusal(ch.bind_queue(&Binding::new("q", "ghost", "k")).await),
        (
            404,
            "NOT_FOUND - no exchange 'ghost' in vhost '/'".to_owned()
        )
    );
    assert!(broker.bindings("x").is_empty());
}
