//! The consumer loop: one per consumer, on its own confirm channel.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use backoff_core::{
    Classify, ConsumerSpec, DEAD_LETTER_HEADROOM, DeadLetter, DeadLetterReason, Decision,
    HeaderValue, MAX_HEADER_DEPTH, Outcome, Topology, broker_headroom, decide, header_limit,
    headers, truncate_error,
};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use lapin::Acker;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions,
    BasicRejectOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection};
use tracing::Instrument;

use crate::consume::state::StateMap;
use crate::settle::copy::{now_rfc3339, panic_message, republish_properties, retry_count_of};
use crate::settle::frame_fit::{
    TooLarge, content_header_len, drop_deep, fit_to_frame, header_depth, release,
    without_largest_headers,
};
use crate::settle::headers::short;
use crate::settle::publish::{channel_error, confirm_channel, publish_confirmed};
use crate::transport::declare::establish_topology;
use crate::{Consumer, Context, Error, PublishFailure, ShutdownHandle};

/// How long a message whose republish failed is held before it is requeued,
/// so that a broken retry or dead-letter route never turns into a hot loop.
const REQUEUE_PAUSE: Duration = Duration::from_secs(1);

/// One delivery being settled: what publishing a copy of it needs.
struct Settling<'a> {
    acker: &'a Acker,
    body: &'a [u8],
    ctx: &'a Context,
    count: u32,
    error: &'a str,
}

/// Where a copy goes: the exchange and routing key it is published with, the
/// queue they lead to, and the room a copy leaves there for the headers the
/// broker adds.
struct Target<'a> {
    exchange: &'a ShortString,
    routing_key: &'a ShortString,
    queue: &'a str,
    headroom: usize,
}

/// Settings shared by every worker of a runtime.
#[derive(Clone)]
pub(crate) struct WorkerEnv {
    pub(crate) connection: Arc<Connection>,
    pub(crate) state: Arc<StateMap>,
    pub(crate) confirm_timeout: Duration,
    pub(crate) shutdown: ShutdownHandle,
}

/// One consumer's running loop and what it needs to settle a delivery.
pub(crate) struct Worker<C: Consumer> {
    consumer: Arc<C>,
    spec: ConsumerSpec,
    topology: Topology,
    queue: Arc<str>,
    channel: Channel,
    /// The connection's negotiated frame size, which every copy must fit.
    frame_max: u32,
    retry_exchange: ShortString,
    retry_keys: Vec<ShortString>,
    dead_letter_exchange: ShortString,
    dead_letter_key: ShortString,
    env: WorkerEnv,
}

impl<C: Consumer> Worker<C> {
    /// Opens the consumer's confirm channel with its prefetch and starts consuming.
    pub(crate) async fn start(
        consumer: Arc<C>,
        spec: ConsumerSpec,
        env: WorkerEnv,
    ) -> Result<(Arc<Self>, lapin::Consumer), Error> {
        let names = spec.names();
        let topology = Topology::of(&spec);
        let channel = confirm_channel(&env.connection, &spec.queue).await?;
        channel
            .basic_qos(spec.prefetch, BasicQosOptions::default())
            .await
            .map_err(channel_error(&spec.queue, "setting the prefetch"))?;
        let stream = channel
            .basic_consume(
                short(&spec.queue, "queue name")?,
                ShortString::from(""),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(channel_error(&spec.queue, "starting to consume"))?;
        let retry_keys = topology
            .retry_queues
            .iter()
            .map(|q| short(&q.name, "retry queue name"))
            .collect::<Result<_, _>>()?;
        let worker = Worker {
            queue: Arc::from(spec.queue.as_str()),
            retry_exchange: short(&names.retry_exchange, "retry exchange name")?,
            retry_keys,
            dead_letter_exchange: short(&names.dead_letter_exchange, "dead-letter exchange name")?,
            dead_letter_key: short(&names.dead_letter_routing_key, "dead-letter routing key")?,
            frame_max: env.connection.configuration().frame_max(),
            consumer,
            spec,
            topology,
            channel,
            env,
        };
        Ok((Arc::new(worker), stream))
    }

    /// Handles deliveries, up to `concurrency` at once, until shutdown or until
    /// the channel fails.
    ///
    /// On shutdown the consumer is cancelled, so the broker sends nothing more;
    /// deliveries already prefetched but not started are requeued at once, for
    /// other instances to take during the grace period; handlers in flight
    /// finish and settle their messages.
    pub(crate) async fn run(self: Arc<Self>, mut stream: lapin::Consumer) -> Result<(), Error> {
        let mut in_flight = FuturesUnordered::new();
        let mut failure = None;
        let mut stream_done = false;
        let mut stopping = false;
        let stop = self.env.shutdown.wait();
        tokio::pin!(stop);
        while !(stream_done && in_flight.is_empty()) {
            tokio::select! {
                next = stream.next(), if !stream_done && (stopping || in_flight.len() < self.spec.effective_concurrency()) => {
                    match next {
                        Some(Ok(delivery)) if stopping => {
                            requeue_unstarted(&delivery.acker).await;
                            release(delivery);
                        }
                        Some(Ok(delivery)) => in_flight.push(self.process(delivery)),
                        Some(Err(e)) => {
                            failure.get_or_insert(e);
                            stream_done = true;
                        }
                        None => stream_done = true,
                    }
                }
                Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
                _ = &mut stop, if !stopping => {
                    stopping = true;
                    if let Err(e) = self.channel.basic_cancel(stream.tag(), BasicCancelOptions::default()).await {
                        tracing::debug!("cancelling the consumer of {}: {e}", self.queue);
                        stream_done = true;
                    }
                }
            }
        }
        // Anything still unacknowledged goes back to the queue.
        let _ = self.channel.close(200, "consumer stopped".into()).await;
        if self.env.shutdown.is_shutdown() {
            return Ok(());
        }
        let queue = self.spec.queue.clone();
        Err(match failure {
            Some(source) => Error::Consume { queue, source },
            None => Error::Cancelled { queue },
        })
    }

    async fn process(&self, delivery: Delivery) {
        let retry = retry_count_of(&delivery.properties);
        let span = tracing::info_span!(
            "delivery",
            queue = %self.queue,
            message_id = delivery.properties.message_id().as_ref().map_or("-", |s| s.as_str()),
            attempt = retry.count.saturating_add(1),
        );
        async move {
            if let Some(warning) = &retry.warning {
                tracing::warn!("{warning}");
            }
            let depth = header_depth(&delivery.properties);
            if depth > MAX_HEADER_DEPTH {
                // Neither the handler nor a copy touches it: both would recurse
                // through the headers on a task's stack.
                self.reject_without_copy(
                    &delivery.acker,
                    format!("headers nest {depth} levels deep, more than {MAX_HEADER_DEPTH}"),
                )
                .await;
                drop_deep(delivery);
                return;
            }
            self.handle_and_settle(delivery, retry.count).await;
        }
        .instrument(span)
        .await
    }

    async fn handle_and_settle(&self, delivery: Delivery, count: u32) {
        let Delivery {
            exchange,
            routing_key,
            redelivered,
            properties,
            data,
            acker,
            ..
        } = delivery;
        let (outcome, ctx) = match self.consumer.decode(&data) {
            Err(error) => {
                let ctx = self.context(exchange, routing_key, redelivered, count, properties);
                (
                    Outcome::Undecodable {
                        error: truncate_error(&error),
                    },
                    ctx,
                )
            }
            Ok(message) => {
                let ctx = self.context(exchange, routing_key, redelivered, count, properties);
                let handled = AssertUnwindSafe(self.consumer.handle(message, &ctx)).catch_unwind();
                let result = match self.spec.handler_timeout {
                    None => Some(handled.await),
                    Some(limit) => tokio::time::timeout(limit, handled).await.ok(),
                };
                let outcome = match result {
                    None => Outcome::Failed {
                        class: backoff_core::ErrorClass::Transient,
                        error: format!(
                            "handler timed out after {}ms",
                            self.spec.handler_timeout.map_or(0, |t| t.as_millis())
                        ),
                    },
                    Some(Ok(Ok(()))) => Outcome::Success,
                    Some(Ok(Err(e))) => Outcome::Failed {
                        class: e.classify(),
                        error: truncate_error(&e.to_string()),
                    },
                    Some(Err(panic)) => Outcome::Failed {
                        class: backoff_core::ErrorClass::Transient,
                        error: truncate_error(&panic_message(panic.as_ref())),
                    },
                };
                (outcome, ctx)
            }
        };
        let error = match &outcome {
            Outcome::Success => "",
            Outcome::Failed { error, .. } | Outcome::Undecodable { error } => error.as_str(),
        };
        let settling = Settling {
            acker: &acker,
            body: &data,
            ctx: &ctx,
            count,
            error,
        };
        match decide(&self.spec.delays, count, &outcome) {
            Decision::Ack => {
                if ack(&acker).await {
                    tracing::debug!("handled; acked");
                }
            }
            Decision::Retry { tier, next_count } => {
                let properties = republish_properties(
                    &ctx.properties,
                    &[(headers::RETRY_COUNT, HeaderValue::Int(next_count.into()))],
                );
                let queue = &self.topology.retry_queues[tier].name;
                let target = Target {
                    exchange: &self.retry_exchange,
                    routing_key: &self.retry_keys[tier],
                    queue,
                    // It dead-letters the copy back when the delay is over.
                    headroom: broker_headroom(
                        queue,
                        self.retry_exchange.as_str(),
                        self.retry_keys[tier].as_str(),
                    ),
                };
                if self
                    .republish_then_ack(&settling, &target, properties)
                    .await
                {
                    tracing::warn!(
                        error,
                        "failed (transient); retry {next_count}/{} after {}ms in {}",
                        self.spec.delays.len(),
                        self.spec.delays.as_millis()[tier],
                        target.queue,
                    );
                }
            }
            Decision::DeadLetter { reason } => {
                let dead_letter = self.dead_letter(&settling, reason, error.to_owned());
                let properties = republish_properties(&ctx.properties, &dead_letter.headers());
                if self
                    .republish_then_ack(&settling, &self.dead_letter_target(), properties)
                    .await
                {
                    tracing::warn!(
                        error,
                        "failed ({reason}); dead-lettered to {}",
                        self.topology.dead_letter_queue.name
                    );
                }
            }
        }
    }

    /// The failure headers of a dead letter of this delivery.
    fn dead_letter(&self, s: &Settling<'_>, reason: DeadLetterReason, error: String) -> DeadLetter {
        DeadLetter {
            reason,
            retry_count: s.count,
            error,
            failed_at: now_rfc3339(),
            queue: self.spec.queue.clone(),
            exchange: s.ctx.exchange.clone(),
            routing_key: s.ctx.routing_key.clone(),
        }
    }

    fn dead_letter_target(&self) -> Target<'_> {
        Target {
            exchange: &self.dead_letter_exchange,
            routing_key: &self.dead_letter_key,
            queue: &self.topology.dead_letter_queue.name,
            headroom: DEAD_LETTER_HEADROOM,
        }
    }

    /// Publishes the copy, shrunk to fit one frame with room for what the
    /// broker adds, and acks the original once the broker confirmed it;
    /// otherwise requeues the original. True when the copy was confirmed.
    async fn republish_then_ack(
        &self,
        s: &Settling<'_>,
        target: &Target<'_>,
        properties: BasicProperties,
    ) -> bool {
        match fit_to_frame(properties, self.copy_limit(target)) {
            Ok(properties) => self.publish_then_ack(s, target, properties).await,
            Err(too_large) => {
                self.settle_oversized(s, too_large).await;
                false
            }
        }
    }

    /// The most content header a copy to `target` may take: the frame, less
    /// room for the headers the broker may add there.
    fn copy_limit(&self, target: &Target<'_>) -> usize {
        header_limit(self.frame_max).saturating_sub(target.headroom)
    }

    /// No copy of this delivery with its own headers fits. When the broker
    /// can still dead-letter it (adding `x-death`) within the frame, reject
    /// it into the dead-letter queue as it is; otherwise dead-letter a copy
    /// without its largest headers, which `x-dropped-headers` names.
    async fn settle_oversized(&self, s: &Settling<'_>, too_large: TooLarge) {
        let limit = header_limit(self.frame_max);
        let size = content_header_len(&s.ctx.properties);
        let headroom = broker_headroom(&self.spec.queue, &s.ctx.exchange, &s.ctx.routing_key);
        let why = format!(
            "a copy would need {} bytes of properties and headers, more than the {} allowed \
             in a frame of {}, even with the framework's own headers shrunk",
            too_large.size, too_large.limit, self.frame_max
        );
        if size + headroom <= limit {
            return self.reject_without_copy(s.acker, why).await;
        }
        let error = format!(
            "{why}; the message itself takes {size} bytes, too close to the frame for the \
             broker to dead-letter it either. Its failure: {}",
            s.error
        );
        let dead_letter = self.dead_letter(s, DeadLetterReason::Oversized, truncate_error(&error));
        let properties = republish_properties(&s.ctx.properties, &dead_letter.headers());
        let target = self.dead_letter_target();
        match without_largest_headers(properties, self.copy_limit(&target)) {
            Some((properties, dropped)) => {
                if self.publish_then_ack(s, &target, properties).await {
                    tracing::error!(
                        "{why}; dead-lettered to {} without the headers {}",
                        target.queue,
                        dropped.join(", ")
                    );
                }
            }
            None => self.reject_without_copy(s.acker, why).await,
        }
    }

    /// Publishes `properties` to `target`, confirmed, then acks the original;
    /// requeues it when the broker did not confirm. True when confirmed.
    async fn publish_then_ack(
        &self,
        s: &Settling<'_>,
        target: &Target<'_>,
        properties: BasicProperties,
    ) -> bool {
        let (acker, body) = (s.acker, s.body);
        let (exchange, routing_key) = (target.exchange, target.routing_key);
        let timeout = self.env.confirm_timeout;
        let published = publish_confirmed(
            &self.channel,
            exchange.clone(),
            routing_key.clone(),
            body,
            properties,
            timeout,
        )
        .await;
        match published {
            Ok(()) => {
                ack(acker).await;
                true
            }
            Err(failure) => {
                self.requeue(acker, routing_key.as_str(), failure).await;
                false
            }
        }
    }

    fn context(
        &self,
        exchange: ShortString,
        routing_key: ShortString,
        redelivered: bool,
        retry_count: u32,
        properties: BasicProperties,
    ) -> Context {
        Context {
            queue: Arc::clone(&self.queue),
            exchange: exchange.into(),
            routing_key: routing_key.into(),
            redelivered,
            retry_count,
            properties,
            state: Arc::clone(&self.env.state),
        }
    }

    /// The copy was not confirmed: give the original back to the broker, never
    /// ack it. An unroutable copy means a retry or dead-letter queue or its
    /// binding is gone, so the topology is declared again first.
    async fn requeue(&self, acker: &Acker, target: &str, failure: PublishFailure) {
        tracing::error!("republish to {target} failed ({failure}); requeueing the original");
        if matches!(failure, PublishFailure::Unroutable) {
            // With declare = "passive", only checked: the error names what is missing.
            let (connection, mode) = (&self.env.connection, self.spec.declare);
            match establish_topology(connection, &self.topology, mode).await {
                Ok(()) => tracing::warn!("topology of {} declared or checked again", self.queue),
                Err(e) => tracing::error!("the topology of {} again: {e}", self.queue),
            }
        }
        tokio::time::sleep(REQUEUE_PAUSE).await;
        match acker
            .nack(BasicNackOptions {
                requeue: true,
                ..BasicNackOptions::default()
            })
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                "not requeued: the channel is closed; the broker will redeliver the message"
            ),
            Err(e) => tracing::warn!("requeue failed ({e}); the broker will redeliver the message"),
        }
    }
}

impl<C: Consumer> Worker<C> {
    /// No copy of this message can be published: reject it without requeue,
    /// so that the work queue's dead-letter exchange moves it into the
    /// dead-letter queue inside the broker, headers intact, with `x-death`
    /// saying `rejected`.
    async fn reject_without_copy(&self, acker: &Acker, why: String) {
        tracing::error!(
            "{why}; rejected without a copy: the broker dead-letters it to {} as it is",
            self.topology.dead_letter_queue.name
        );
        match acker.reject(BasicRejectOptions { requeue: false }).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                "not rejected: the channel is closed; the broker will redeliver the message"
            ),
            Err(e) => tracing::warn!("reject failed ({e}); the broker will redeliver the message"),
        }
    }
}

/// Gives a delivery that was prefetched but never started back to the broker.
async fn requeue_unstarted(acker: &Acker) {
    let requeue = BasicNackOptions {
        requeue: true,
        ..BasicNackOptions::default()
    };
    if let Err(e) = acker.nack(requeue).await {
        tracing::debug!("returning an unstarted delivery: {e}; the broker will redeliver it");
    }
}

/// Acks; `false` when the channel is gone (the broker will then redeliver).
async fn ack(acker: &Acker) -> bool {
    match acker.ack(BasicAckOptions::default()).await {
        Ok(true) => true,
        Ok(false) => {
            tracing::warn!(
                "not acked: the channel is closed; the broker will redeliver the message"
            );
            false
        }
        Err(e) => {
            tracing::warn!("ack failed ({e}); the broker will redeliver the message");
            false
        }
    }
}
