//! Tests of the in-memory broker alone, through the `Channel` trait, on
//! paused time.

mod confirm;
mod consume;
mod dead_letter;
mod declare;
mod held;
mod routing;
mod throughput;
mod ttl;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use rabbit_backoff_core::{Argument, Binding, QueueDecl};

use rabbit_backoff_runtime::transport::{
    Channel, Deliveries, Delivery, Publication, Transport, TransportError,
};
use rabbit_backoff_testing::TestBroker;

/// A broker and one open channel on it.
async fn setup() -> (TestBroker, Arc<dyn Channel>) {
    let broker = TestBroker::new();
    let channel = open(&broker).await;
    (broker, channel)
}

/// [`setup`], with the plain queues `queues` declared.
async fn setup_with(queues: &[&str]) -> (TestBroker, Arc<dyn Channel>) {
    let (broker, channel) = setup().await;
    for queue in queues {
        declare_plain(&channel, queue).await;
    }
    (broker, channel)
}

async fn open(broker: &TestBroker) -> Arc<dyn Channel> {
    broker
        .connect()
        .await
        .expect("connect")
        .open_channel()
        .await
        .expect("open a channel")
}

fn int(key: &str, value: i64) -> (String, Argument) {
    (key.to_owned(), Argument::Int(value))
}

fn text(key: &str, value: &str) -> (String, Argument) {
    (key.to_owned(), Argument::Str(value.to_owned()))
}

fn decl(name: &str, arguments: Vec<(String, Argument)>) -> QueueDecl {
    QueueDecl::new(name).with_arguments(arguments)
}

/// Declares a queue that dead-letters to the queue `to` through the default
/// exchange, with more arguments.
async fn declare_dead_lettering(
    channel: &Arc<dyn Channel>,
    name: &str,
    to: &str,
    mut more: Vec<(String, Argument)>,
) {
    more.push(text("x-dead-letter-exchange", ""));
    more.push(text("x-dead-letter-routing-key", to));
    channel
        .declare_queue(&decl(name, more))
        .await
        .expect("declare");
}

async fn declare_plain(channel: &Arc<dyn Channel>, name: &str) {
    channel
        .declare_queue(&decl(name, vec![]))
        .await
        .expect("declare");
}

/// Properties with a message id (the body's label) and optional expiration.
fn labelled(label: &str) -> BasicProperties {
    BasicProperties::default().with_message_id(ShortString::from(label))
}

/// Publishes `label` as body and message id through the default exchange.
async fn put(channel: &Arc<dyn Channel>, queue: &str, label: &str) {
    let confirm = channel
        .publish(Publication::new(
            "",
            queue,
            label.as_bytes(),
            labelled(label),
        ))
        .await
        .expect("publish");
    assert_eq!(
        confirm,
        rabbit_backoff_runtime::transport::Confirm::Ack,
        "publish {label} to {queue}"
    );
}

/// The message at the head of `queue`, fetched with a get (failing the test
/// when the queue is empty).
async fn take(channel: &Arc<dyn Channel>, queue: &str) -> Delivery {
    channel
        .get(queue)
        .await
        .expect("get")
        .unwrap_or_else(|| panic!("a message in {queue}"))
}

/// Takes the message at the head of `queue` and rejects it without
/// requeueing.
async fn reject_next(channel: &Arc<dyn Channel>, queue: &str) {
    take(channel, queue)
        .await
        .acker
        .reject()
        .await
        .expect("reject");
}

/// The next delivery (waiting up to a virtual day).
async fn next(deliveries: &mut Deliveries) -> Delivery {
    match tokio::time::timeout(Duration::from_secs(86_400), deliveries.stream.next()).await {
        Ok(Some(Ok(delivery))) => delivery,
        Ok(Some(Err(e))) => panic!("the stream failed: {e}"),
        Ok(None) => panic!("the stream ended"),
        Err(_) => panic!("no delivery within a (virtual) day"),
    }
}

/// Whether nothing arrives within `wait` (of virtual time).
async fn quiet_for(deliveries: &mut Deliveries, wait: Duration) -> bool {
    tokio::time::timeout(wait, deliveries.stream.next())
        .await
        .is_err()
}

fn label(delivery: &Delivery) -> String {
    String::from_utf8_lossy(&delivery.data).into_owned()
}

/// Bodies of the ready messages of a queue, in order.
fn labels(broker: &TestBroker, queue: &str) -> Vec<String> {
    broker
        .messages(queue)
        .iter()
        .map(|m| String::from_utf8_lossy(m.body()).into_owned())
        .collect()
}

fn refusal<T: std::fmt::Debug>(result: Result<T, TransportError>) -> (u16, String) {
    match result {
        Err(TransportError::Refused { code, text }) => (code, text),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn header<'a>(properties: &'a BasicProperties, name: &str) -> Option<&'a AMQPValue> {
    properties
        .headers()
        .as_ref()
        .and_then(|h: &FieldTable| h.inner().get(name))
}
