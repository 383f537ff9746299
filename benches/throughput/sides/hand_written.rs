//! The hand-written lapin loops on the article's topology: `article` and
//! `full` (`for_each_concurrent`), `spawned` and `spawned-full` (a task per
//! delivery), `delayed` (4.3's delayed retries).

use std::sync::Arc;
use std::time::SystemTime;

use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, Connection};
use rabbit_backoff::ShutdownHandle;
use rabbit_backoff_core::ConsumerSpec;

use crate::names::Names;
use crate::target::closed;
use crate::work::{Kind, Msg, Tally};

/// How a baseline retries a transient failure.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retries {
    /// A copy to the retry tier, then the ack.
    Tiers,
    /// `basic.reject(requeue = true)` into a queue with 4.3's delayed retries.
    DelayedRequeue,
}

/// Which headers a baseline's dead letters carry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeadLetterHeaders {
    /// The article's: `x-retry-count`, `x-error`, `x-failed-at`.
    Article,
    /// The framework's: the article's, `x-dead-letter-reason` and
    /// `x-original-queue`/`-exchange`/`-routing-key`, without what the
    /// queue's name implies (an exchange or key equal to it). A first retry
    /// copy carries only its count in both.
    Full,
}

/// Where a hand-written loop sends what fails, and how.
pub(crate) struct Route {
    pub(crate) retry_exchange: ShortString,
    pub(crate) retry_key: ShortString,
    pub(crate) dlx: ShortString,
    pub(crate) dlq_key: ShortString,
    pub(crate) queue: String,
    pub(crate) dead_letter_headers: DeadLetterHeaders,
    pub(crate) retries: Retries,
}

impl Route {
    pub(crate) fn of(
        names: &Names,
        dead_letter_headers: DeadLetterHeaders,
        retries: Retries,
    ) -> Self {
        Route {
            retry_exchange: names.retry_exchange.as_str().into(),
            retry_key: names.retry_queue.as_str().into(),
            dlx: names.dlx.as_str().into(),
            dlq_key: names.dlq_key.as_str().into(),
            queue: names.work_queue.clone(),
            dead_letter_headers,
            retries,
        }
    }
}

/// A channel of a hand-written loop: publisher confirms, the prefetch,
/// consuming the work queue.
pub(crate) async fn consuming(
    connection: &Connection,
    spec: &ConsumerSpec,
    names: &Names,
) -> (Channel, lapin::Consumer) {
    let channel = connection.create_channel().await.expect("channel");
    channel
        .confirm_select(Default::default())
        .await
        .expect("confirms");
    channel
        .basic_qos(spec.prefetch, BasicQosOptions::default())
        .await
        .expect("qos");
    let consumer = channel
        .basic_consume(
            names.work_queue.as_str().into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    (channel, consumer)
}

/// The loop a careful developer writes by hand with lapin: same prefetch,
/// same concurrency, a confirm awaited per republish, then the ack; the
/// deliveries handled with `for_each_concurrent` in the consumer's task.
pub(crate) async fn baseline(
    connection: &Connection,
    spec: ConsumerSpec,
    names: Names,
    tally: Arc<Tally>,
    stop: ShutdownHandle,
    dead_letter_headers: DeadLetterHeaders,
    retries: Retries,
) {
    let (channel, consumer) = consuming(connection, &spec, &names).await;
    let route = Route::of(&names, dead_letter_headers, retries);
    consumer
        .take_until(stop.wait())
        .for_each_concurrent(spec.effective_concurrency(), |delivery| {
            let (channel, tally, route) = (&channel, &tally, &route);
            async move {
                if let Ok(delivery) = delivery {
                    handle_delivery(channel, delivery, tally, route).await;
                }
            }
        })
        .await;
    closed(channel.close(200, "".into())).await;
}

/// The stronger hand-written loop: one task spawned per delivery on the
/// multi-thread runtime (the prefetch bounds how many are in flight), each
/// awaiting its republish's confirm, then acking: the handlers of one
/// channel run on every worker thread.
pub(crate) async fn baseline_spawned(
    connection: &Connection,
    spec: ConsumerSpec,
    names: Names,
    tally: Arc<Tally>,
    stop: ShutdownHandle,
    dead_letter_headers: DeadLetterHeaders,
) {
    let (channel, mut consumer) = consuming(connection, &spec, &names).await;
    let route = Arc::new(Route::of(&names, dead_letter_headers, Retries::Tiers));
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let delivery = tokio::select! {
            _ = stop.wait() => break,
            delivery = consumer.next() => delivery,
        };
        let Some(Ok(delivery)) = delivery else { break };
        let (channel, tally, route) = (channel.clone(), tally.clone(), route.clone());
        tasks.spawn(async move { handle_delivery(&channel, delivery, &tally, &route).await });
        // Finished tasks are reaped as they go: the set stays as small as
        // the prefetch.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    closed(channel.close(200, "".into())).await;
}

/// One delivery of a hand-written loop: decode, decide, republish a copy
/// with its confirm awaited (nack with requeue when it is not confirmed),
/// then ack.
pub(crate) async fn handle_delivery(
    channel: &Channel,
    delivery: lapin::message::Delivery,
    tally: &Tally,
    route: &Route,
) {
    let Route {
        retry_exchange,
        retry_key,
        dlx,
        dlq_key,
        queue,
        dead_letter_headers,
        retries,
    } = route;
    let (dead_letter_headers, retries) = (*dead_letter_headers, *retries);
    tally.seen();
    let count = match delivery
        .properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get("x-retry-count"))
    {
        Some(AMQPValue::LongLongInt(n)) => *n,
        _ => 0,
    };
    let msg: Msg = serde_json::from_slice(&delivery.data).expect("bench payload");
    if retries == Retries::DelayedRequeue
        && msg.kind == Kind::TransientOnce
        && !matches!(
            delivery.properties.headers().as_ref().and_then(|h| h.inner().get("x-delivery-count")),
            Some(AMQPValue::LongLongInt(n)) if *n > 0
        )
    {
        let _ = delivery
            .acker
            .reject(lapin::options::BasicRejectOptions { requeue: true })
            .await;
        return;
    }
    let republish = match msg.kind {
        Kind::Permanent => Some((dlx, dlq_key, count, Some("permanent failure"))),
        Kind::TransientOnce if count == 0 && retries == Retries::Tiers => {
            Some((retry_exchange, retry_key, count + 1, None))
        }
        _ => None,
    };
    if let Some((exchange, key, new_count, error)) = republish {
        let mut headers = delivery.properties.headers().clone().unwrap_or_default();
        // The count always, 0 included, in the article's as in the
        // framework's dead letters.
        headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(new_count));
        // A retry copy here is always a first one, which carries only its
        // count, in `full` as in the framework's (without a `max_age`).
        if let Some(error) = error {
            let failed_at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
            headers.insert(
                "x-error".into(),
                AMQPValue::LongString(LongString::from(error.as_bytes())),
            );
            headers.insert(
                "x-failed-at".into(),
                AMQPValue::LongString(failed_at.into_bytes().into()),
            );
            if dead_letter_headers == DeadLetterHeaders::Full {
                // What the framework's dead letters say besides: why, and where from.
                let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes()));
                headers.insert("x-dead-letter-reason".into(), text("permanent"));
                headers.insert("x-original-queue".into(), text(queue));
                for (name, value) in [
                    ("x-original-exchange", delivery.exchange.as_str()),
                    ("x-original-routing-key", delivery.routing_key.as_str()),
                ] {
                    if value != queue.as_str() {
                        headers.insert(name.into(), text(value));
                    }
                }
            }
        }
        let properties = delivery
            .properties
            .clone()
            .with_headers(headers)
            .with_delivery_mode(2);
        let confirm = channel
            .basic_publish(
                exchange.clone(),
                key.clone(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                &delivery.data,
                properties,
            )
            .await;
        let confirmed = match confirm {
            Ok(confirm) => matches!(confirm.await, Ok(lapin::Confirmation::Ack(None))),
            Err(_) => false,
        };
        if !confirmed {
            let _ = delivery
                .acker
                .nack(lapin::options::BasicNackOptions {
                    requeue: true,
                    multiple: false,
                })
                .await;
            return;
        }
    } else {
        tally.handled(msg.id);
    }
    let _ = delivery.acker.ack(BasicAckOptions::default()).await;
}
