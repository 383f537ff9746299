//! The inbox in the consumer loop: a delivery's key is claimed before its
//! handler runs, and completed or released as its decision is carried out.
//! The loop calls [`Inbox::admit`] before the handler and [`Inbox::finish`]
//! in place of settling; everything else about duplicates is here.

use std::future::Future;
use std::sync::Arc;

use lapin::BasicProperties;
use metrics::{Counter, counter};
use rabbit_backoff_core::{
    ConsumerSpec, Decision, Dedupe, DedupeKey, HeaderValue, KeyFate, headers, inbox_key,
};

use crate::dedupe::{Claim, ClaimRequest, DedupeStore, HeldKey, OutboxChannel};
use crate::settle::executor::{Executor, Original};
use crate::telemetry::meters::{DUPLICATES_SKIPPED, WITHOUT_KEY};
use crate::transport::amqp_values::header_view;
use crate::transport::{Acker, Delivery};

/// Where an inbox says that its store does not answer (`Some`, with why)
/// or answers again (`None`).
pub(crate) type StoreReport = Arc<dyn Fn(Option<&str>) + Send + Sync>;

/// One consumer's inbox.
pub(crate) struct Inbox {
    store: Arc<dyn DedupeStore>,
    dedupe: Dedupe,
    consumer: Arc<str>,
    /// Whether the handler takes the store's transaction (`Tx`).
    transaction: bool,
    confirm_timeout: std::time::Duration,
    skipped: Counter,
    without_key: Counter,
    report: Option<StoreReport>,
}

/// What the inbox made of a delivery.
// Returned once per delivery and taken apart at once: boxing the delivery
// would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Admission {
    /// Run the handler on the delivery, holding the key when it has one.
    Run(Option<Box<dyn HeldKey>>, Delivery),
    /// A duplicate (acknowledged), or a key held elsewhere or a store that
    /// did not answer (requeued after a pause): nothing more to do.
    Settled,
}

impl Inbox {
    /// The inbox of a consumer with `dedupe`, on the runtime's store.
    pub(crate) fn new(
        spec: &ConsumerSpec,
        transaction: bool,
        store: Option<&Arc<dyn DedupeStore>>,
        confirm_timeout: std::time::Duration,
        report: Option<StoreReport>,
    ) -> Option<Self> {
        let (dedupe, store) = (spec.dedupe.clone()?, Arc::clone(store?));
        let consumer = spec.queue.clone();
        Some(Inbox {
            store,
            dedupe,
            transaction,
            confirm_timeout,
            skipped: counter!(DUPLICATES_SKIPPED, "consumer" => consumer.clone()),
            without_key: counter!(WITHOUT_KEY, "consumer" => consumer.clone()),
            consumer: Arc::from(consumer),
            report,
        })
    }

    /// Claims the delivery's key. A duplicate is acknowledged here, and a
    /// key another delivery holds, or a store that does not answer, has the
    /// delivery requeued after a pause: neither reaches the handler. A
    /// delivery without a key is handled as without dedupe, and counted.
    pub(crate) async fn admit(&self, delivery: Delivery, executor: &Executor) -> Admission {
        let Some(key) = self.key_of(&delivery.properties) else {
            self.without_key.increment(1);
            tracing::debug!(
                "no {} to dedupe on; handled without the inbox",
                self.dedupe.key
            );
            return Admission::Run(None, delivery);
        };
        let request = ClaimRequest {
            consumer: &self.consumer,
            key: &key,
            window: self.dedupe.window,
            transaction: self.transaction,
        };
        match self.store.claim(request).await {
            Ok(Claim::Claimed(held)) => {
                self.store_answers();
                Admission::Run(Some(held), delivery)
            }
            Ok(Claim::Duplicate) => {
                self.store_answers();
                executor.ack(delivery.acker, &delivery.properties).await;
                self.skipped.increment(1);
                tracing::info!(key, "duplicate: handled already; acked without the handler");
                Admission::Settled
            }
            Ok(Claim::InProgress) => {
                self.store_answers();
                tracing::info!(
                    key,
                    "another delivery of this key is being handled; requeued after a pause"
                );
                give_back_after_pause(executor, delivery).await;
                Admission::Settled
            }
            Err(e) => {
                tracing::warn!(key, "{e}; requeued after a pause");
                self.report(Some(&e.to_string()));
                give_back_after_pause(executor, delivery).await;
                Admission::Settled
            }
        }
    }

    /// Carries out `decision` with `settle` (which acks, or publishes a
    /// copy then acks; true when done), completing or releasing the key:
    /// - handled: the key (and in a transactional store the handler's
    ///   writes and outbox messages) commits before the ack, then the outbox
    ///   messages are published; a failed commit requeues the delivery (a
    ///   key that fails to record after work done outside the store is
    ///   acked all the same);
    /// - dead-lettered or discarded: once settled, the key is completed
    ///   (the handler's writes rolled back); released if settling failed;
    /// - retried: the key is released first, for the retry to claim.
    pub(crate) async fn finish<F: Future<Output = bool>>(
        &self,
        held: Box<dyn HeldKey>,
        decision: &Decision,
        (acker, original): (Acker, &Original<'_>),
        executor: &Executor,
        settle: impl FnOnce(Acker) -> F,
    ) {
        match (KeyFate::of(decision), decision) {
            (KeyFate::Complete, Decision::Ack) => match held.complete().await {
                Ok(completed) => {
                    if !completed.outbox.is_empty() {
                        self.dispatch(&completed.outbox, executor).await;
                    }
                    settle(acker).await;
                }
                Err(e) if self.transaction => {
                    tracing::warn!(
                        "{e}; the handler's work is not committed: requeued after a pause"
                    );
                    self.report(Some(&e.to_string()));
                    executor
                        .requeue_after_pause(acker, original.body, original.properties)
                        .await;
                }
                // The handler's work is done outside the store: acked, and
                // a duplicate of it within the window would run again.
                Err(e) => {
                    tracing::warn!("{e}; handled, but the key is not recorded");
                    self.report(Some(&e.to_string()));
                    settle(acker).await;
                }
            },
            (KeyFate::Complete, _) => {
                let outcome = if settle(acker).await {
                    held.complete_failed().await
                } else {
                    held.release().await
                };
                if let Err(e) = outcome {
                    tracing::warn!("{e}; a duplicate of this message would be handled again");
                }
            }
            // Release: the key is freed, so that the message is handled
            // again rather than dropped as a duplicate. (`KeyFate` is
            // `#[non_exhaustive]` for services: a fate added to the pinned
            // core without a branch here would free its key too.)
            _ => {
                if let Err(e) = held.release().await {
                    tracing::warn!("{e}; the key is freed when its claim ends");
                }
                settle(acker).await;
            }
        }
    }

    /// Publishes the outbox messages just committed; those it cannot are
    /// left to the relay.
    async fn dispatch(&self, ids: &[i64], executor: &Executor) {
        match self
            .store
            .dispatch(
                ids,
                OutboxChannel::new(executor.channel(), self.confirm_timeout),
            )
            .await
        {
            Ok(sent) if sent < ids.len() => tracing::debug!(
                "published {sent} of {} outbox messages; the relay takes the others",
                ids.len()
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("{e}; the relay publishes the outbox messages"),
        }
    }

    /// The delivery's inbox key: its `message_id` or header, and the
    /// number of its replay when it was replayed from the dead-letter queue.
    fn key_of(&self, properties: &BasicProperties) -> Option<String> {
        let headers = properties.headers().as_ref();
        let key = match &self.dedupe.key {
            DedupeKey::MessageId => properties.message_id().as_ref()?.as_str().to_owned(),
            DedupeKey::Header(name) => match header_view(headers?.inner().get(name.as_str())?) {
                HeaderValue::Str(s) => s.to_owned(),
                HeaderValue::Int(n) => n.to_string(),
                _ => return None,
            },
            // Not reached with the core pinned exactly (`=0.1.0`);
            // `DedupeKey` is `#[non_exhaustive]` for services, so Rust wants
            // this arm: without a key, handled without the inbox.
            _ => return None,
        };
        if key.is_empty() {
            return None;
        }
        let replays = headers
            .and_then(|h| h.inner().get(headers::REPLAY_COUNT))
            .and_then(|v| match header_view(v) {
                HeaderValue::Int(n) => u32::try_from(n).ok(),
                _ => None,
            })
            .unwrap_or(0);
        Some(inbox_key(&key, replays).into_owned())
    }

    /// After a claim answered: a store reported down is back.
    fn store_answers(&self) {
        self.report(None);
    }

    fn report(&self, down: Option<&str>) {
        if let Some(report) = &self.report {
            report(down);
        }
    }
}

/// Gives a delivery that did not reach its handler back to its queue after
/// a pause.
async fn give_back_after_pause(executor: &Executor, delivery: Delivery) {
    let Delivery {
        acker,
        data,
        properties,
        ..
    } = delivery;
    executor
        .requeue_after_pause(acker, &data, &properties)
        .await;
}
