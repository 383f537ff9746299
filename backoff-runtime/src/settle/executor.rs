//! What a decision does: the broker actions that carry out `backoff-core`'s
//! [`Decision`] for one handled delivery of a consumer. The target queue of
//! a retry or dead letter, the copy's headers, fitting it into a frame,
//! republish-then-ack, reject, requeue, and the metrics of each outcome;
//! what to do when a copy cannot fit is in `oversized.rs`, a retry the
//! broker holds back in `held_retry.rs`. Every delivery of the consumer's
//! channel is settled through its [`Acks`], which coalesces the
//! acknowledgements and which the consumer's loop shares.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use lapin::BasicProperties;
use rabbit_backoff_core::{
    ConsumerSpec, DEAD_LETTER_HEADROOM, DeadLetter, DeadLetterReason, Decision, Fate, IndexFeed,
    PackedEntry, QueueType, ReplayFate, RetryBackend, Topology, broker_headroom, truncate_error,
};

use crate::broker::declare::establish_topology;
use crate::broker::index_entry::packed_entry;
use crate::broker::index_writer::IndexWriter;
use crate::error::PublishFailure;
use crate::settle::acks::Acks;
use crate::settle::copy_properties::{
    dead_letter_properties, held_annotations, now_rfc3339, retry_properties,
};
use crate::settle::first_failure::{TierDelays, since_first_failure};
use crate::settle::replay_marker::replay_marker;
use crate::settle::settlement::{Settler, Target};
use crate::telemetry::failure_log::{FailureFate, FailureLog, failure_line, record_failure};
use crate::telemetry::meters::Meters;
use crate::transport::{Acker, Channel, Connection};

/// How long a message whose republish failed is held before it is requeued,
/// so that a broken retry or dead-letter route never turns into a hot loop.
pub(crate) const REQUEUE_PAUSE: Duration = Duration::from_secs(1);

/// A handled delivery, as settling it needs it, borrowed from where the
/// handler saw it.
pub(crate) struct Original<'a> {
    pub(crate) body: &'a [u8],
    pub(crate) properties: &'a BasicProperties,
    pub(crate) exchange: &'a str,
    pub(crate) routing_key: &'a str,
    pub(crate) retry_count: u32,
    /// The handler's error (empty on success).
    pub(crate) error: &'a str,
}

/// A decision that publishes a copy, and what it says.
#[derive(Clone, Copy)]
enum CopyKind {
    Retry { delay_ms: u64, next_count: u32 },
    DeadLetter(DeadLetterReason),
}

/// Carries out one consumer's decisions on its channel.
pub(crate) struct Executor {
    pub(super) settler: Settler,
    /// The acknowledgements of the consumer's channel, shared with its loop.
    pub(super) acks: Arc<Acks>,
    /// The consumer's metrics, shared with its loop.
    pub(super) meters: Arc<Meters>,
    /// The sampler of the failures' log lines.
    pub(super) failures: FailureLog,
    pub(super) spec: ConsumerSpec,
    pub(super) topology: Topology,
    /// Each retry queue of `topology` with its delay.
    pub(super) tiers: TierDelays,
    /// Whether a first retry copy carries `x-retried-at`: only for a
    /// `max_age`, which needs its first failure to the millisecond.
    pub(super) stamp_first: bool,
    pub(super) dead_letter_routing_key: String,
    /// Where the topology is declared again when a copy is unroutable.
    pub(super) connection: Arc<dyn Connection>,
    /// Where each confirmed dead letter is written to the dead-letter
    /// index, and the index's entries stream, when the consumer writes it
    /// ([`IndexFeed::Written`]).
    pub(super) index: Option<(IndexWriter, Arc<str>)>,
    /// Where the fates of replayed copies go: the writer, and the replay
    /// log of the consumer's dead-letter queue.
    pub(super) fates: Option<(IndexWriter, Arc<str>)>,
}

impl Executor {
    /// The executor of `spec`'s consumer, settling on `channel` through
    /// `acks` and counting in `meters`, both shared with its loop.
    pub(crate) fn new(
        channel: Arc<dyn Channel>,
        connection: &Arc<dyn Connection>,
        confirm_timeout: Duration,
        spec: &ConsumerSpec,
        index_writer: Option<&IndexWriter>,
        (acks, meters): (&Arc<Acks>, &Arc<Meters>),
    ) -> Self {
        let topology = Topology::of(spec);
        let index = match (topology.index_feed(), index_writer) {
            (Some(IndexFeed::Written), Some(writer)) => Some((
                writer.clone(),
                Arc::from(topology.dead_letter_index.entries.name.as_str()),
            )),
            _ => None,
        };
        let fates = index_writer.map(|writer| {
            (
                writer.clone(),
                Arc::from(spec.names().replay_log().as_str()),
            )
        });
        Executor {
            index,
            fates,
            tiers: TierDelays::of(&topology, &spec.retry_delays()),
            stamp_first: spec.max_age.is_some(),
            settler: Settler::new(channel, Arc::clone(connection), confirm_timeout),
            acks: Arc::clone(acks),
            meters: Arc::clone(meters),
            failures: FailureLog::new(&spec.queue),
            topology,
            dead_letter_routing_key: spec.names().dead_letter_routing_key,
            connection: Arc::clone(connection),
            spec: spec.clone(),
        }
    }

    /// The consumer's channel.
    pub(crate) fn channel(&self) -> &dyn Channel {
        self.settler.channel()
    }

    /// How long ago a delivery with `properties` first failed, as its
    /// headers say it (read against the consumer's tiers).
    pub(crate) fn since_first_failure(&self, properties: &BasicProperties) -> Option<Duration> {
        since_first_failure(properties, &self.tiers)
    }

    /// Acknowledges a delivery that needs no decision: a duplicate the
    /// inbox recognised, acked without its handler.
    pub(crate) async fn ack(&self, acker: Acker, properties: &BasicProperties) {
        self.acks.ack(acker).await;
        self.record_fate(properties, Fate::Handled, "");
    }

    /// Carries out `decision` for `original`, settled through `acker`.
    /// True when settled as decided; false when the copy was not confirmed
    /// and the delivery was requeued or rejected instead. A replayed copy's
    /// fate is recorded once it is settled as decided.
    pub(crate) async fn execute(
        &self,
        acker: Acker,
        original: &Original<'_>,
        decision: Decision,
    ) -> bool {
        let fate = Fate::of(&decision);
        let settled = self.settle(acker, original, decision).await;
        if settled {
            self.record_fate(original.properties, fate, original.error);
        }
        settled
    }

    /// Hands the fate of a delivery that carries a replay job's marker to
    /// the writer of its replay log; does nothing for any other delivery.
    fn record_fate(&self, properties: &BasicProperties, fate: Fate, error: &str) {
        let Some((writer, log)) = &self.fates else {
            return;
        };
        let Some(headers) = properties.headers() else {
            return;
        };
        let Some((job, seq)) = replay_marker(headers) else {
            return;
        };
        self.meters.replay_fate(fate);
        let error = (fate.is_failure() && !error.is_empty()).then(|| truncate_error(error));
        writer.fate(log, ReplayFate::new(job, seq, fate, error));
    }

    /// Carries out `decision` (see [`execute`](Self::execute)).
    async fn settle(&self, acker: Acker, original: &Original<'_>, decision: Decision) -> bool {
        let error = original.error;
        let (copy, target) = match decision {
            Decision::Ack => {
                self.acks.ack(acker).await;
                self.meters.handled(*original.properties.timestamp());
                tracing::debug!("handled; acked");
                return true;
            }
            Decision::Discard => {
                self.acks.ack(acker).await;
                self.meters.discarded();
                tracing::info!(
                    error,
                    "failed; discarded (the error says the message is obsolete)"
                );
                return true;
            }
            Decision::Hold {
                delay_ms,
                next_count,
                exact,
            } => {
                return self
                    .hold(&acker, original, (delay_ms, exact), next_count)
                    .await;
            }
            Decision::Retry {
                delay_ms,
                next_count,
            } => (
                CopyKind::Retry {
                    delay_ms,
                    next_count,
                },
                self.retry_target(delay_ms),
            ),
            Decision::Redeliver {
                delay_ms,
                next_count,
            } => {
                // No copy: the work queue holds it back and counts it.
                if let Err(e) = self.acks.fail(&acker).await {
                    tracing::warn!(
                        error,
                        "not rejected ({e}); the broker will redeliver the message"
                    );
                    return false;
                }
                self.retried(
                    error,
                    delay_ms,
                    next_count,
                    format_args!(
                        "{delay_ms}ms, held back by {}",
                        self.topology.work_queue.name
                    ),
                );
                return true;
            }
            Decision::DeadLetter { reason } => {
                (CopyKind::DeadLetter(reason), self.dead_letter_target())
            }
        };
        if !self.copy_then_ack(acker, original, &target, copy).await {
            return false;
        }
        match copy {
            CopyKind::Retry {
                delay_ms,
                next_count,
            } => self.retried(
                error,
                delay_ms,
                next_count,
                format_args!("{}", target.queue),
            ),
            CopyKind::DeadLetter(reason) => {
                self.meters
                    .dead_lettered(reason, *original.properties.timestamp());
                record_failure(error);
                failure_line!(
                    self.failures.level(FailureFate::DeadLettered),
                    error,
                    "failed ({reason}); dead-lettered to {}",
                    target.queue
                );
            }
        }
        true
    }

    /// Counts a transient failure of `error` as retry `next_count` after
    /// `delay_ms` (a tier's delay, or `None` for a wait the error asked
    /// for), and says so, with where the message waits.
    pub(super) fn retried(
        &self,
        error: &str,
        delay_ms: impl Into<Option<u64>>,
        next_count: u32,
        waits_in: fmt::Arguments<'_>,
    ) {
        self.meters.retried(delay_ms.into());
        record_failure(error);
        failure_line!(
            self.failures.level(FailureFate::Retried),
            error,
            "failed (transient); retry {next_count}/{} in {waits_in}",
            self.spec.delays.len(),
        );
    }

    /// The retry queue of a tier of `delay_ms`: its own, or with jitter one
    /// of its sub-queues at random.
    fn retry_target(&self, delay_ms: u64) -> Target<'_> {
        let ms = self.spec.jittered(delay_ms, fastrand::f64());
        let queue = self.tiers.queue_of(ms);
        let exchange = &self.topology.retry_exchange.name;
        Target {
            exchange,
            // Each retry queue is bound to the retry exchange with its own name.
            routing_key: queue,
            queue,
            // It dead-letters the copy back when the delay is over.
            headroom: broker_headroom(queue, exchange, queue),
        }
    }

    pub(super) fn dead_letter_target(&self) -> Target<'_> {
        let names = &self.topology;
        Target {
            exchange: &names.dead_letter_exchange.name,
            routing_key: &self.dead_letter_routing_key,
            queue: &names.dead_letter_queue.name,
            headroom: DEAD_LETTER_HEADROOM,
        }
    }

    /// The failure headers of a dead letter of `original`.
    pub(super) fn dead_letter<'a>(
        &'a self,
        original: &Original<'a>,
        reason: DeadLetterReason,
        error: &'a str,
        failed_at: &'a str,
    ) -> DeadLetter<'a> {
        DeadLetter::new(reason, error, failed_at)
            .with_retry_count(original.retry_count)
            .with_origin(&self.spec.queue, original.exchange, original.routing_key)
    }

    /// Publishes the copy, shrunk to fit one frame with room for what the
    /// broker adds, and acks the original once confirmed. True when
    /// confirmed.
    ///
    /// The copy's properties are built here, not passed in: a value an
    /// `async fn` takes stays in its future for the whole of it, so the
    /// properties would be held once by each layer they went through.
    async fn copy_then_ack(
        &self,
        acker: Acker,
        original: &Original<'_>,
        target: &Target<'_>,
        copy: CopyKind,
    ) -> bool {
        let fitted = {
            let properties = match copy {
                CopyKind::Retry { next_count, .. } => retry_properties(
                    original.properties,
                    next_count,
                    self.stamp_first,
                    &self.tiers,
                ),
                CopyKind::DeadLetter(reason) => {
                    let failed_at = now_rfc3339();
                    let dead_letter =
                        self.dead_letter(original, reason, original.error, &failed_at);
                    // A dead letter at the first failure carries no
                    // `x-first-failed-at`: it would say what `x-failed-at` says.
                    // A retry the broker held back also sets what
                    // `held_annotations` says (an allocation only then).
                    let headers = dead_letter.headers();
                    let set: Cow<'_, [_]> = if self.spec.retry == RetryBackend::Scheduled {
                        let held = held_annotations(original.properties);
                        Cow::Owned(headers.into_iter().chain(held).collect())
                    } else {
                        Cow::Borrowed(&headers)
                    };
                    dead_letter_properties(original.properties, &set, &self.tiers)
                }
            };
            self.settler.fit(properties, target)
        };
        let published = match fitted {
            Ok(properties) => {
                let dead_letter = matches!(copy, CopyKind::DeadLetter(_));
                self.publish_copy(target, original.body, properties, dead_letter)
                    .await
            }
            Err(too_large) => {
                Box::pin(self.settle_oversized(acker, original, too_large)).await;
                return false;
            }
        };
        self.acked_or_requeued(acker, original, target, published)
            .await
    }

    /// Publishes a copy of `body` with `properties` to `target`; a dead
    /// letter (`dead_letter`) goes to the dead-letter index once confirmed.
    ///
    /// Not an `async fn`: the properties go straight into the publish's
    /// future, not into one more layer of futures (see
    /// [`copy_then_ack`](Self::copy_then_ack)).
    pub(super) fn publish_copy<'a>(
        &'a self,
        target: &'a Target<'_>,
        body: &'a [u8],
        properties: BasicProperties,
        dead_letter: bool,
    ) -> impl Future<Output = Result<(), PublishFailure>> + 'a {
        let entry = if dead_letter {
            self.index_entry(&properties, body)
        } else {
            None
        };
        // A combinator, not an `async` block awaiting the publish: that
        // would hold the publish's future twice.
        self.settler
            .publish(target, body, properties)
            .map(move |published| {
                self.indexed(published.is_ok(), entry);
                published
            })
    }

    /// The entry in the dead-letter index of a dead letter about to be
    /// published with `properties`, when the consumer writes the index: made
    /// now, in one buffer, so that only the entry waits for the confirm, not
    /// a copy of the properties.
    fn index_entry(&self, properties: &BasicProperties, body: &[u8]) -> Option<PackedEntry> {
        self.index.as_ref()?;
        let entry = packed_entry(properties, body.len());
        if entry.is_none() {
            tracing::debug!(
                "a dead letter whose headers nest too deep has no entry in the dead-letter \
                 index; the count check finds it"
            );
        }
        entry
    }

    /// Hands a dead letter confirmed in the dead-letter queue to the index
    /// writer, without waiting.
    fn indexed(&self, confirmed: bool, entry: Option<PackedEntry>) {
        if let (true, Some(entry), Some((writer, stream))) = (confirmed, entry, &self.index) {
            writer.write(stream, entry);
        }
    }

    /// After a copy's publish: acks the original once the broker confirmed
    /// it. Otherwise the copy was not taken, and the original goes back to
    /// its queue after a pause (after declaring the topology again, when the
    /// copy was unroutable). True when confirmed.
    pub(super) async fn acked_or_requeued(
        &self,
        acker: Acker,
        original: &Original<'_>,
        target: &Target<'_>,
        published: Result<(), PublishFailure>,
    ) -> bool {
        let Err(failure) = published else {
            self.acks.ack(acker).await;
            return true;
        };
        tracing::error!(
            "republish to {} failed ({failure}); requeueing the original",
            target.queue
        );
        if let PublishFailure::Unroutable = failure {
            Box::pin(self.repair()).await;
        }
        Box::pin(self.requeue_after_pause(acker, original.body, original.properties)).await;
        false
    }

    /// Declares (or, with `declare = "passive"`, checks) the topology again:
    /// an unroutable copy means a retry or dead-letter queue or its binding
    /// is gone.
    async fn repair(&self) {
        let queue = &self.topology.work_queue.name;
        match establish_topology(&*self.connection, &self.topology, self.spec.declare).await {
            Ok(()) => tracing::warn!("topology of {queue} declared or checked again"),
            Err(e) => tracing::error!("the topology of {queue} again: {e}"),
        }
    }

    /// Rejects a delivery without requeue, so that its queue's dead-letter
    /// exchange moves it to the dead-letter queue inside the broker, as it
    /// is; `why` is logged at ERROR.
    pub(crate) async fn reject(&self, acker: &Acker, why: &str) {
        tracing::error!(
            "{why}; rejected without a copy: the broker dead-letters it to {} as it is",
            self.topology.dead_letter_queue.name
        );
        if let Err(e) = self.acks.nack(acker, false).await {
            tracing::warn!("not rejected ({e}); the broker will redeliver the message");
        }
    }

    /// Gives a delivery that was never started back to its queue at once
    /// (see [`give_back`](Self::give_back)).
    pub(crate) async fn requeue_now(
        &self,
        acker: Acker,
        body: &[u8],
        properties: &BasicProperties,
    ) {
        self.give_back(acker, body, properties).await;
    }

    /// Gives a delivery back to its queue after [`REQUEUE_PAUSE`], so that a
    /// failure that repeats cannot become a hot loop. Without the pause when
    /// the connection is lost: the broker returns the delivery by itself, and
    /// the consumer can reconnect at once.
    pub(crate) async fn requeue_after_pause(
        &self,
        acker: Acker,
        body: &[u8],
        properties: &BasicProperties,
    ) {
        tokio::select! {
            _ = tokio::time::sleep(REQUEUE_PAUSE) => {}
            _ = self.settler.lost().wait() => {}
        }
        self.give_back(acker, body, properties).await;
    }

    /// Returns a delivery that reached no verdict (a key another delivery
    /// holds, a store that does not answer, a copy not taken, a consumer
    /// stopping or paused by its breaker) to its work queue.
    ///
    /// From a quorum work queue it goes back as a confirmed copy, as it
    /// came, at the back of the queue, and the original is acked: before
    /// RabbitMQ 4.3 a `nack(requeue = true)` uses up the queue's
    /// `x-delivery-limit`, which would dead-letter a message that never
    /// failed once it had been given back that often (4.3 counts only
    /// rejections). A copy is a new message, with no deliveries counted.
    /// Elsewhere, or when the copy is not taken, the delivery is nacked with
    /// requeue. With `retry = "delayed"` (RabbitMQ 4.3 only) it is nacked
    /// with requeue too: 4.3 does not count that return, and the original
    /// keeps its `x-delivery-count`, the retry count of that backend, which a
    /// copy would not.
    async fn give_back(&self, acker: Acker, body: &[u8], properties: &BasicProperties) {
        if self.spec.effective_queue_type() == QueueType::Quorum
            && self.spec.retry == RetryBackend::Tiers
            && !self.settler.lost().is_lost()
        {
            let queue = &self.topology.work_queue.name;
            let target = Target {
                exchange: "",
                routing_key: queue,
                queue,
                headroom: broker_headroom(queue, "", queue),
            };
            if let Ok(fitted) = self.settler.fit(properties.clone(), &target) {
                match self.settler.publish(&target, body, fitted).await {
                    Ok(()) => return self.acks.ack(acker).await,
                    Err(e) => tracing::debug!("giving back as a copy: {e}; requeued instead"),
                }
            }
        }
        if let Err(e) = self.acks.nack(&acker, true).await {
            tracing::warn!("not requeued ({e}); the broker will redeliver the message");
        }
    }

    /// Acknowledges what finished, then closes the consumer's channel
    /// (every unsettled delivery returns to its queue) and the one copies
    /// went to, when another.
    pub(crate) async fn close(&self) {
        self.acks.flush().await;
        self.settler.close().await;
    }
}
