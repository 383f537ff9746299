//! The hand-written AMQP 1.0 loop (`amqp1-loop`): fe2o3-amqp with the
//! framework's settlements, for RabbitMQ 4.3's held-back retries.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection};
use rabbit_backoff::ShutdownHandle;
use rabbit_backoff_core::ConsumerSpec;
use rabbit_backoff_test_support::amqp1;

use crate::names::Names;
use crate::target::closed;
use crate::work::{Kind, Msg, Tally};

/// How the hand-written AMQP 1.0 loop settles a delivery.
pub(crate) enum Settle {
    Accept,
    /// Back to the queue, not counted as failed: a dead-letter copy that
    /// was not confirmed (the `spawned` loop's nack with requeue).
    Release,
    /// A retry held back by the queue until its `x-opt-delivery-time`.
    Modify(fe2o3_amqp::types::messaging::Modified),
}

/// What the handler tasks of the AMQP 1.0 loop share.
pub(crate) struct Amqp1Work {
    /// A confirm channel for the dead-letter copies.
    pub(crate) copies: Channel,
    pub(crate) dlx: ShortString,
    pub(crate) dlq_key: ShortString,
    /// The schedule: the delay of retry `n` (from 0) is `delays[n]`.
    pub(crate) delays: Vec<u64>,
    pub(crate) tally: Arc<Tally>,
    pub(crate) settled:
        tokio::sync::mpsc::UnboundedSender<(u64, fe2o3_amqp::link::delivery::DeliveryInfo, Settle)>,
}

/// The strongest loop a careful user of fe2o3-amqp writes for RabbitMQ
/// 4.3's held-back retries, with the framework's settlements: a receiver
/// link on the work queue whose credit keeps at most `prefetch` deliveries
/// unsettled (granted again in batches of half, as the framework's link
/// does; fe2o3's `CreditMode::Auto` would let 1.5 × prefetch be
/// unsettled), a task spawned per delivery on the multi-thread runtime
/// (the `spawned` loop's concurrency), each decoding the JSON payload and
/// sending its settlement back to the link's task, which owns the
/// `Receiver` (receiving needs `&mut`) and settles what is ready at once:
/// the accepted ones as one disposition per range of consecutive delivery
/// ids (`accept_all`), a retry as `modified` with `x-opt-delivery-time`
/// (now + the schedule's delay), `x-opt-retry-count` and `x-opt-error`. A
/// dead letter (a permanent failure, or the retries used up) is what the
/// framework does: a copy with the article's `x-retry-count`, `x-error`
/// and `x-failed-at` published over AMQP 0-9-1 on `connection` with its
/// confirm awaited, then `accepted`; `released` when it is not confirmed.
///
/// RabbitMQ 4.3 answers a link's first credit request with a `flow` (the
/// consumer is active); fe2o3-amqp 0.18 applies its delivery count while
/// transfers may still wait in the link's buffer, counts them twice and
/// drops what then comes beyond its own count (`TransferLimitExceeded`).
/// As the framework does (and a careful user who met it would), the loop
/// first grants no credit and waits 10 ms for that flow before it grants
/// its credit; should a link drop transfers all the same, it grants no
/// more credit, lets the deliveries it took be settled, and replaces the
/// link: the broker returns the dropped messages to the queue. Another
/// error ends the link: the loop attaches a new one, and the settlements of
/// the old link's deliveries are dropped.
pub(crate) async fn amqp1_loop(
    url: &str,
    connection: &Connection,
    spec: ConsumerSpec,
    names: Names,
    tally: Arc<Tally>,
    stop: ShutdownHandle,
) {
    use fe2o3_amqp::link::Receiver;
    use fe2o3_amqp::link::receiver::CreditMode;
    use fe2o3_amqp::types::messaging::Body;
    use fe2o3_amqp::types::primitives::Value;

    let copies = connection.create_channel().await.expect("channel");
    copies
        .confirm_select(Default::default())
        .await
        .expect("confirms");
    let container = format!("bench-amqp1-loop-{}", uuid::Uuid::new_v4().simple());
    // Its own socket, with Nagle's algorithm off.
    let mut amqp = amqp1::open(url, container).await;
    let mut session = fe2o3_amqp::Session::begin(&mut amqp)
        .await
        .expect("an AMQP 1.0 session");
    let prefetch = u32::from(spec.prefetch).max(1);
    let source = format!("/queues/{}", names.work_queue);
    let mut generation = 0u64;
    // A receiver with `prefetch` credit, named after its generation.
    async fn attach(
        session: &mut fe2o3_amqp::session::SessionHandle<()>,
        source: &str,
        generation: u64,
        prefetch: u32,
    ) -> Receiver {
        let mut receiver = Receiver::builder()
            .name(format!("bench-amqp1-loop-{generation}"))
            .source(source)
            .credit_mode(CreditMode::Manual)
            .attach(session)
            .await
            .expect("a receiver on the work queue");
        receiver.set_credit(0).await.expect("no credit");
        tokio::time::sleep(Duration::from_millis(10)).await;
        receiver.set_credit(prefetch).await.expect("credit");
        receiver
    }
    let mut receiver = attach(&mut session, &source, generation, prefetch).await;
    let (settled, mut settlements) = tokio::sync::mpsc::unbounded_channel();
    let work = Arc::new(Amqp1Work {
        copies,
        dlx: names.dlx.as_str().into(),
        dlq_key: names.dlq_key.as_str().into(),
        delays: spec.delays.as_millis().to_vec(),
        tally,
        settled,
    });
    let mut tasks = tokio::task::JoinSet::new();
    let mut unsettled: u32 = 0;
    // Transfers fe2o3-amqp dropped on the current link.
    let mut dropped: u32 = 0;
    let stopping = stop.wait();
    tokio::pin!(stopping);
    loop {
        if dropped > 0 && unsettled == 0 {
            // Every delivery taken is settled: a new link, and the broker
            // returns the dropped messages as the old one detaches.
            generation += 1;
            let new = attach(&mut session, &source, generation, prefetch).await;
            let old = std::mem::replace(&mut receiver, new);
            let _ = tokio::time::timeout(Duration::from_secs(5), old.close()).await;
            dropped = 0;
        }
        tokio::select! {
            biased;
            _ = &mut stopping => break,
            Some(first) = settlements.recv() => {
                // Everything the handlers settled since: the accepted ones
                // in one go.
                let mut accepted = Vec::new();
                let mut next = Some(first);
                while let Some((of, info, settle)) = next {
                    if of != generation {
                        // Back in the queue since that link ended.
                        next = settlements.try_recv().ok();
                        continue;
                    }
                    unsettled -= 1;
                    let disposed = match settle {
                        Settle::Accept => {
                            accepted.push(info);
                            Ok(())
                        }
                        Settle::Release => receiver.release(info).await,
                        Settle::Modify(modified) => receiver.modify(info, modified).await,
                    };
                    disposed.expect("settle");
                    next = settlements.try_recv().ok();
                }
                if !accepted.is_empty() {
                    receiver.accept_all(accepted).await.expect("accept");
                }
                if dropped > 0 {
                    // No credit until the link is replaced.
                    continue;
                }
                // Credit up to `prefetch` unsettled, in batches of half.
                let wanted = prefetch - unsettled;
                if wanted > receiver.credit()
                    && wanted - receiver.credit() >= (prefetch / 2).max(1)
                {
                    receiver.set_credit(wanted).await.expect("credit");
                }
            }
            delivery = receiver.recv::<Body<Value>>() => {
                let delivery = match delivery {
                    Ok(delivery) => delivery,
                    Err(fe2o3_amqp::link::RecvError::TransferLimitExceeded) => {
                        dropped += 1;
                        continue;
                    }
                    Err(e) => {
                        eprintln!("amqp1-loop: the link ended ({e:?}); attaching another");
                        let _ = tokio::time::timeout(Duration::from_secs(5), receiver.close()).await;
                        generation += 1;
                        unsettled = 0;
                        dropped = 0;
                        receiver = attach(&mut session, &source, generation, prefetch).await;
                        continue;
                    }
                };
                unsettled += 1;
                let work = work.clone();
                tasks.spawn(async move {
                    let (info, message) = delivery.into_parts();
                    let settle = handle_amqp1(&work, message).await;
                    let _ = work.settled.send((generation, info, settle));
                });
                while tasks.try_join_next().is_some() {}
            }
        }
    }
    tasks.abort_all();
    let _ = tokio::time::timeout(Duration::from_secs(5), receiver.close()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), session.end()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), amqp.close()).await;
    closed(work.copies.close(200, "".into())).await;
}

/// One delivery of the AMQP 1.0 loop: decode, decide, and for a dead letter
/// publish the copy and await its confirm; the settlement to send.
pub(crate) async fn handle_amqp1(
    work: &Amqp1Work,
    message: fe2o3_amqp::types::messaging::Message<
        fe2o3_amqp::types::messaging::Body<fe2o3_amqp::types::primitives::Value>,
    >,
) -> Settle {
    use fe2o3_amqp::types::messaging::annotations::AnnotationKey;
    use fe2o3_amqp::types::messaging::{Body, MessageId, Modified};
    use fe2o3_amqp::types::primitives::{OrderedMap, Symbol, Timestamp, Value};

    work.tally.seen();
    // What AMQP 0-9-1 published arrives as one data section.
    let data: &[u8] = match &message.body {
        Body::Data(sections) => sections.first().map_or(&[], |d| d.0.as_slice()),
        _ => &[],
    };
    let msg: Msg = serde_json::from_slice(data).expect("bench payload");
    // The broker gives the count back as a `long`, whatever it was sent as.
    let count = match message
        .message_annotations
        .as_ref()
        .and_then(|a| a.get(&"x-opt-retry-count" as &dyn AnnotationKey))
    {
        Some(Value::Long(n)) => *n,
        Some(Value::Uint(n)) => i64::from(*n),
        Some(Value::Ulong(n)) => i64::try_from(*n).unwrap_or(i64::MAX),
        _ => 0,
    };
    let retries = work.delays.len() as i64;
    let error = match msg.kind {
        Kind::Permanent => "permanent failure",
        Kind::TransientOnce if count == 0 => "transient failure",
        _ => {
            work.tally.handled(msg.id);
            return Settle::Accept;
        }
    };
    if msg.kind == Kind::TransientOnce && count < retries {
        let delay = work.delays[count as usize];
        let at = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is past 1970")
            .as_millis() as i64
            + delay as i64;
        let mut annotations = OrderedMap::new();
        annotations.insert(
            Symbol::from("x-opt-delivery-time"),
            Value::Timestamp(Timestamp::from_milliseconds(at)),
        );
        annotations.insert(
            Symbol::from("x-opt-retry-count"),
            Value::Uint(count as u32 + 1),
        );
        annotations.insert(Symbol::from("x-opt-error"), Value::String(error.to_owned()));
        return Settle::Modify(Modified {
            delivery_failed: Some(true),
            undeliverable_here: Some(false),
            message_annotations: Some(annotations),
        });
    }
    // A dead letter: the copy with the article's headers, confirmed.
    let mut headers = FieldTable::default();
    headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(count));
    headers.insert(
        "x-error".into(),
        AMQPValue::LongString(LongString::from(error.as_bytes())),
    );
    let failed_at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    headers.insert(
        "x-failed-at".into(),
        AMQPValue::LongString(failed_at.into_bytes().into()),
    );
    let mut properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(headers);
    if let Some(p) = &message.properties {
        if let Some(MessageId::String(id)) = &p.message_id {
            properties = properties.with_message_id(id.as_str().into());
        }
        if let Some(content_type) = &p.content_type {
            properties = properties.with_content_type(content_type.as_str().into());
        }
    }
    let confirm = work
        .copies
        .basic_publish(
            work.dlx.clone(),
            work.dlq_key.clone(),
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            data,
            properties,
        )
        .await;
    let confirmed = match confirm {
        Ok(confirm) => matches!(confirm.await, Ok(lapin::Confirmation::Ack(None))),
        Err(_) => false,
    };
    if confirmed {
        Settle::Accept
    } else {
        Settle::Release
    }
}
