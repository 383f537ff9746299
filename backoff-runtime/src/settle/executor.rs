//! What a decision does: the broker actions that carry out `backoff-core`'s
//! [`Decision`] for one handled delivery of a consumer. The target queue of
//! a retry or dead letter, the copy's headers, fitting it into a frame (and
//! what to do when it cannot fit), republish-then-ack, reject, requeue, and
//! the metrics of each outcome. Every delivery of the consumer's channel is
//! settled through its [`Acks`], which coalesces the acknowledgements.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::FutureExt;
use lapin::BasicProperties;
use rabbit_backoff_core::{
    ConsumerSpec, DEAD_LETTER_HEADROOM, DeadLetter, DeadLetterReason, Decision, IndexFeed,
    QueueType, RetryBackend, Topology, annotations, broker_headroom, header_limit, truncate_error,
};

use crate::broker::declare::establish_topology;
use crate::broker::index_writer::IndexWriter;
use crate::error::PublishFailure;
use crate::settle::acks::Acks;
use crate::settle::copy_properties::{
    dead_letter_properties, held_annotations, now_rfc3339, retry_properties,
};
use crate::settle::encoded_size::content_header_len;
use crate::settle::first_failure::{TierDelays, first_failed_at};
use crate::settle::settlement::{Settler, Target};
use crate::settle::shrink_copy::{TooLarge, without_largest_headers};
use crate::telemetry::failure_log::{FailureFate, FailureLog, failure_line, record_failure};
use crate::telemetry::meters::Meters;
use crate::telemetry::wall_clock::{self, Stamp};
use crate::transport::{Acker, AnnotationValue, Channel, Connection, Modification};

/// How long a message whose republish failed is held before it is requeued,
/// so that a broken retry or dead-letter route never turns into a hot loop.
pub(crate) const REQUEUE_PAUSE: Duration = Duration::from_secs(1);

/// `time` in milliseconds since the Unix epoch (AMQP 1.0's timestamp),
/// rounded up: the broker delivers a held message at that millisecond, so a
/// retry never comes back before its delay has passed.
fn unix_ms_not_before(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| {
        let whole = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
        i64::try_from(whole).unwrap_or(i64::MAX)
    })
}

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
    settler: Settler,
    /// The acknowledgements of the consumer's channel.
    pub(crate) acks: Acks,
    pub(crate) meters: Meters,
    /// The sampler of the failures' log lines.
    failures: FailureLog,
    spec: ConsumerSpec,
    topology: Topology,
    /// Each retry queue of `topology` with its delay.
    pub(crate) tiers: TierDelays,
    /// Whether a first retry copy carries `x-retried-at`: only for a
    /// `max_age`, which needs its first failure to the millisecond.
    stamp_first: bool,
    dead_letter_routing_key: String,
    /// Where the topology is declared again when a copy is unroutable.
    connection: Arc<dyn Connection>,
    /// Where each confirmed dead letter is written to the dead-letter
    /// index, and the index's entries stream, when the consumer writes it
    /// ([`IndexFeed::Written`]).
    index: Option<(IndexWriter, Arc<str>)>,
}

impl Executor {
    /// The executor of `spec`'s consumer, settling on `channel`.
    pub(crate) fn new(
        channel: Arc<dyn Channel>,
        connection: &Arc<dyn Connection>,
        confirm_timeout: Duration,
        spec: &ConsumerSpec,
        index_writer: Option<&IndexWriter>,
    ) -> Self {
        let tiers: Vec<u64> = spec
            .delays
            .as_millis()
            .iter()
            .chain(spec.ladders.iter().flatten())
            .copied()
            .collect();
        let topology = Topology::of(spec);
        let index = match (topology.index_feed(), index_writer) {
            (Some(IndexFeed::Written), Some(writer)) => Some((
                writer.clone(),
                Arc::from(topology.dead_letter_index.entries.name.as_str()),
            )),
            _ => None,
        };
        Executor {
            index,
            tiers: TierDelays::of(&topology, &spec.retry_delays()),
            stamp_first: spec.max_age.is_some(),
            settler: Settler::new(channel, Arc::clone(connection), confirm_timeout),
            acks: Acks::new(ack_batch(spec.prefetch)),
            meters: Meters::new(&spec.queue, &tiers),
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

    /// Carries out `decision` for `original`, settled through `acker`.
    /// True when settled as decided; false when the copy was not confirmed
    /// and the delivery was requeued or rejected instead.
    pub(crate) async fn execute(
        &self,
        acker: Acker,
        original: &Original<'_>,
        decision: Decision,
    ) -> bool {
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
                let wait = match exact {
                    true => Wait::Asked(delay_ms),
                    false => Wait::Tier(delay_ms),
                };
                return self.hold(&acker, original, wait, next_count).await;
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

    /// `retry = "scheduled"`: settles a transient failure as `modified`, to
    /// be delivered again `delay_ms` (with jitter) from now, with the retry
    /// count, the error and the first failure as annotations. No copy: the
    /// work queue holds the message back. True when settled.
    async fn hold(
        &self,
        acker: &Acker,
        original: &Original<'_>,
        wait: Wait,
        next_count: u32,
    ) -> bool {
        let ms = match wait {
            Wait::Tier(delay_ms) => self.spec.jittered(delay_ms, fastrand::f64()),
            // What the error asked for, never less.
            Wait::Asked(delay_ms) => delay_ms,
        };
        let now = wall_clock::now();
        let at = now + Duration::from_millis(ms);
        let modification = Modification::failed()
            .annotate(
                annotations::DELIVERY_TIME,
                AnnotationValue::Timestamp(unix_ms_not_before(at)),
            )
            .annotate(annotations::RETRY_COUNT, AnnotationValue::Uint(next_count))
            .annotate(
                annotations::ERROR,
                AnnotationValue::String(truncate_error(original.error)),
            )
            .annotate(
                annotations::FIRST_FAILED_AT,
                AnnotationValue::String(self.first_failure(original.properties, now)),
            );
        if let Err(e) = self.acks.modify(acker, modification).await {
            tracing::warn!(
                error = original.error,
                "not held back ({e}); the broker will deliver the message again"
            );
            return false;
        }
        // Counted under its tier (or as asked), whatever the jitter picked.
        self.retried(
            original.error,
            wait.counted(),
            next_count,
            format_args!("{ms}ms, held back by {}", self.topology.work_queue.name),
        );
        true
    }

    /// When the message first failed, as its annotation says, or `now` at
    /// its first failure.
    fn first_failure(&self, properties: &BasicProperties, now: SystemTime) -> String {
        match first_failed_at(properties, &self.tiers).and_then(|first| first.time()) {
            Some(first) => Stamp::of(first).to_string(),
            None => Stamp::of(now).to_string(),
        }
    }

    /// Counts a transient failure of `error` as retry `next_count` after
    /// `delay_ms` (a tier's delay, or `None` for a wait the error asked
    /// for), and says so, with where the message waits.
    fn retried(
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

    fn dead_letter_target(&self) -> Target<'_> {
        let names = &self.topology;
        Target {
            exchange: &names.dead_letter_exchange.name,
            routing_key: &self.dead_letter_routing_key,
            queue: &names.dead_letter_queue.name,
            headroom: DEAD_LETTER_HEADROOM,
        }
    }

    /// The failure headers of a dead letter of `original`.
    fn dead_letter<'a>(
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
    fn publish_copy<'a>(
        &'a self,
        target: &'a Target<'_>,
        body: &'a [u8],
        properties: BasicProperties,
        dead_letter: bool,
    ) -> impl Future<Output = Result<(), PublishFailure>> + 'a {
        let entry = if dead_letter {
            self.index_entry(&properties)
        } else {
            None
        };
        // A combinator, not an `async` block awaiting the publish: that
        // would hold the publish's future twice.
        self.settler
            .publish(target, body, properties)
            .map(move |published| {
                self.indexed(published.is_ok(), entry, body);
                published
            })
    }

    /// The properties of a dead letter about to be published, kept for its
    /// entry in the dead-letter index when the consumer writes the index
    /// (boxed: they wait in the settling future while the copy is
    /// confirmed).
    fn index_entry(&self, properties: &BasicProperties) -> Option<Box<BasicProperties>> {
        self.index.as_ref().map(|_| Box::new(properties.clone()))
    }

    /// Hands a dead letter confirmed in the dead-letter queue to the index
    /// writer, without waiting.
    fn indexed(&self, confirmed: bool, entry: Option<Box<BasicProperties>>, body: &[u8]) {
        if let (true, Some(properties), Some((writer, stream))) = (confirmed, entry, &self.index) {
            writer.write(stream, body, properties);
        }
    }

    /// After a copy's publish: acks the original once the broker confirmed
    /// it. Otherwise the copy was not taken, and the original goes back to
    /// its queue after a pause (after declaring the topology again, when the
    /// copy was unroutable). True when confirmed.
    async fn acked_or_requeued(
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

    /// No copy of this delivery with its own headers fits where it was
    /// going. In order:
    ///
    /// 1. a dead letter with every header of its own and the article's
    ///    (reason `oversized`), when the dead-letter queue has room for it:
    ///    a retry copy needs more, room for the `x-death` its tier adds;
    /// 2. the delivery rejected into the dead-letter queue as it is, when the
    ///    broker can still dead-letter it (adding `x-death`) within the
    ///    frame: its own headers leave no room for the framework's, and
    ///    `x-death` says when and why (`rejected`);
    /// 3. a dead letter without its largest headers, which
    ///    `x-dropped-headers` names.
    async fn settle_oversized(&self, acker: Acker, original: &Original<'_>, too_large: TooLarge) {
        let frame_max = self.settler.frame_max();
        let size = content_header_len(original.properties);
        let why = format!(
            "a copy would need {} bytes of properties and headers, more than the {} allowed \
             in a frame of {frame_max}, even with the framework's own headers shrunk",
            too_large.size, too_large.limit
        );
        let target = self.dead_letter_target();
        let failed_at = now_rfc3339();
        // The properties of an `oversized` dead letter saying `error`.
        let oversized = |error: &str| {
            let dead_letter =
                self.dead_letter(original, DeadLetterReason::Oversized, error, &failed_at);
            dead_letter_properties(original.properties, &dead_letter.headers(), &self.tiers)
        };
        let whole = oversized(&truncate_error(&format!(
            "{why}; dead-lettered instead. Its failure: {}",
            original.error
        )));
        if let Ok(properties) = self.settler.fit(whole, &target) {
            return self
                .oversized_copy(acker, original, &target, properties, &why, &[])
                .await;
        }
        let headroom = broker_headroom(&self.spec.queue, original.exchange, original.routing_key);
        if size + headroom <= header_limit(frame_max) {
            return self.reject(&acker, &why).await;
        }
        let properties = oversized(&truncate_error(&format!(
            "{why}; the message itself takes {size} bytes, too close to the frame for the \
             broker to dead-letter it either. Its failure: {}",
            original.error
        )));
        match without_largest_headers(properties, self.settler.copy_limit(&target)) {
            Some((properties, dropped)) => {
                self.oversized_copy(acker, original, &target, properties, &why, &dropped)
                    .await
            }
            None => self.reject(&acker, &why).await,
        }
    }

    /// Publishes an `oversized` dead letter of `original`, without the
    /// headers `dropped` names, and acks the original once confirmed.
    async fn oversized_copy(
        &self,
        acker: Acker,
        original: &Original<'_>,
        target: &Target<'_>,
        properties: BasicProperties,
        why: &str,
        dropped: &[String],
    ) {
        let published = self
            .publish_copy(target, original.body, properties, true)
            .await;
        if self
            .acked_or_requeued(acker, original, target, published)
            .await
        {
            self.meters.dead_lettered(
                DeadLetterReason::Oversized,
                *original.properties.timestamp(),
            );
            if dropped.is_empty() {
                tracing::error!("{why}; dead-lettered to {}", target.queue);
            } else {
                tracing::error!(
                    "{why}; dead-lettered to {} without the headers {}",
                    target.queue,
                    dropped.join(", ")
                );
            }
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

/// How many finished deliveries wait to be acknowledged together: half the
/// prefetch window, so that the broker keeps sending while they wait (see
/// PERFORMANCE.md, "Coalesced acknowledgements").
fn ack_batch(prefetch: u16) -> usize {
    usize::from(prefetch / 2).max(1)
}

/// How long a held retry waits.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// A tier's delay, jittered when the consumer has jitter.
    Tier(u64),
    /// Exactly what the error asked for (`RetryAfter`).
    Asked(u64),
}

impl Wait {
    /// The tier the retried counter counts it under: none for a wait the
    /// error asked for.
    fn counted(self) -> Option<u64> {
        match self {
            Wait::Tier(delay_ms) => Some(delay_ms),
            Wait::Asked(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_time_is_never_before_the_delay() {
        let at = |nanos| UNIX_EPOCH + Duration::from_nanos(nanos);
        assert_eq!(
            unix_ms_not_before(at(1_700_000_000_000_000_000)),
            1_700_000_000_000
        );
        assert_eq!(
            unix_ms_not_before(at(1_700_000_000_000_000_001)),
            1_700_000_000_001
        );
        assert_eq!(
            unix_ms_not_before(at(1_700_000_000_000_999_999)),
            1_700_000_000_001
        );
        assert_eq!(unix_ms_not_before(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
