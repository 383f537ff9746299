//! The consumer loop: one per consumer, on its own confirm channel. Each
//! delivery is decoded, handled, decided on (by `backoff-core`) and settled.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use std::time::Duration;

use futures_util::future::OptionFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use rabbit_backoff_core::{
    Attempt, Breaker, BreakerAction, Classify, ConsumerSpec, DEAD_LETTER_HEADROOM, DeadLetter,
    DeadLetterReason, Decision, HeaderValue, MAX_HEADER_DEPTH, Outcome, Topology, Verdict,
    broker_headroom, decide, header_limit, headers, parse_failed_at, truncate_error,
};
use tracing::Instrument;

use crate::consume::inbox::{Admission, Inbox};
use crate::consume::meters::Meters;
use crate::consume::state::StateMap;
use crate::idempotency::{DedupeStore, HeldKey};
use crate::settle::clock;
use crate::settle::copy::{now_rfc3339, panic_message, republish_properties, retry_count_of};
use crate::settle::frame_fit::{
    TooLarge, content_header_len, header_depth, release, without_largest_headers,
};
use crate::settle::publish::{channel_error, confirm_channel};
use crate::settle::settlement::{Repair, Settler, Target};
use crate::settle::trace_context::continue_trace;
use crate::transport::declare::establish_topology;
use crate::transport::deep_drop::drop_deep;
use crate::transport::values::header_view;
use crate::transport::{Acker, Connection, Deliveries, Delivery, TransportError};
use crate::{Consumer, Context, Error, Health, ShutdownHandle};

/// The first pause of an immediate retry; the n-th waits n times as long.
const IMMEDIATE_PAUSE: Duration = Duration::from_millis(50);

/// Settings shared by every worker of a runtime.
#[derive(Clone)]
pub(crate) struct WorkerEnv {
    pub(crate) connection: Arc<dyn Connection>,
    pub(crate) state: Arc<StateMap>,
    pub(crate) confirm_timeout: Duration,
    pub(crate) shutdown: ShutdownHandle,
    /// Where a consumer reports a paused circuit breaker.
    pub(crate) health: Option<tokio::sync::watch::Sender<Health>>,
    /// The inbox of the consumers with `dedupe`.
    pub(crate) dedupe_store: Option<Arc<dyn DedupeStore>>,
}

/// How consuming ended.
enum Consumed {
    /// Shutdown, a cancelled consumer or a failed channel (the error).
    Ended(Option<TransportError>),
    /// The circuit breaker tripped: pause this long, then probe.
    Tripped(Duration),
}

/// One delivery after its handler ran: what settling it needs.
struct Handled {
    acker: Acker,
    body: Vec<u8>,
    ctx: Context,
    outcome: Outcome,
}

impl Handled {
    fn error(&self) -> &str {
        match &self.outcome {
            Outcome::Success => "",
            Outcome::Failed { error, .. } | Outcome::Undecodable { error } => error,
        }
    }
}

/// One consumer's running loop and what it needs to settle a delivery.
pub(crate) struct Worker<C: Consumer> {
    consumer: Arc<C>,
    spec: ConsumerSpec,
    topology: Topology,
    queue: Arc<str>,
    /// The delay of each retry queue of `topology.retry_queues`, in order.
    retry_delays: Vec<u64>,
    dead_letter_routing_key: String,
    settler: Settler,
    meters: Meters,
    /// With `dedupe`: drops duplicates before the handler.
    inbox: Option<Inbox>,
    env: WorkerEnv,
}

impl<C: Consumer> Worker<C> {
    /// Opens the consumer's confirm channel with its prefetch and starts consuming.
    pub(crate) async fn start(
        consumer: Arc<C>,
        spec: ConsumerSpec,
        env: WorkerEnv,
    ) -> Result<(Arc<Self>, Deliveries), Error> {
        let topology = Topology::of(&spec);
        let channel = confirm_channel(&*env.connection, &spec.queue).await?;
        channel
            .qos(spec.prefetch)
            .await
            .map_err(channel_error(&spec.queue, "setting the prefetch"))?;
        let deliveries = channel
            .consume(&spec.queue)
            .await
            .map_err(channel_error(&spec.queue, "starting to consume"))?;
        let settler = Settler::new(
            channel,
            Arc::clone(&env.connection),
            env.confirm_timeout,
            Some(repair(&env.connection, &topology, &spec)),
        );
        let tiers: Vec<u64> = spec
            .delays
            .as_millis()
            .iter()
            .chain(spec.ladders.iter().flatten())
            .copied()
            .collect();
        let takes_transaction = crate::idempotency::transaction_requirement()
            .is_some_and(|tx| consumer.required_state().contains(&tx));
        let inbox = Inbox::new(
            &spec,
            takes_transaction,
            env.dedupe_store.as_ref(),
            env.confirm_timeout,
            env.health.clone(),
        );
        let worker = Worker {
            meters: Meters::new(&spec.queue, &tiers),
            inbox,
            queue: Arc::from(spec.queue.as_str()),
            dead_letter_routing_key: spec.names().dead_letter_routing_key,
            retry_delays: spec.retry_delays(),
            consumer,
            spec,
            topology,
            settler,
            env,
        };
        Ok((Arc::new(worker), deliveries))
    }

    /// Handles deliveries, up to `concurrency` at once, until shutdown or until
    /// the channel fails.
    ///
    /// On shutdown the consumer is cancelled, so the broker sends nothing more;
    /// deliveries already prefetched but not started are requeued at once, for
    /// other instances to take during the grace period; handlers in flight
    /// finish and settle their messages.
    pub(crate) async fn run(self: Arc<Self>, deliveries: Deliveries) -> Result<(), Error> {
        let mut breaker = self.spec.breaker.map(Breaker::new);
        let mut deliveries = deliveries;
        loop {
            let pause = match self.consume(deliveries, breaker.as_mut()).await {
                Consumed::Tripped(pause) => pause,
                Consumed::Ended(failure) => return self.finish(failure).await,
            };
            let Some(breaker) = breaker.as_mut() else {
                unreachable!("only a breaker trips")
            };
            if !self.pause_and_probe(breaker, pause).await {
                return self.finish(None).await;
            }
            self.report(Health::Ready);
            self.meters.breaker_open.set(0.0);
            deliveries = self
                .settler
                .channel()
                .consume(&self.spec.queue)
                .await
                .map_err(channel_error(
                    &self.spec.queue,
                    "consuming again after a pause",
                ))?;
            tracing::info!("the dependency is back: consuming {} again", self.queue);
        }
    }

    /// Consumes until shutdown, the end of the stream, or the breaker trips.
    ///
    /// On shutdown or a trip the consumer is cancelled, so the broker sends
    /// nothing more; deliveries already prefetched but not started are
    /// requeued at once (for other instances to take); handlers in flight
    /// finish and settle their messages.
    async fn consume(&self, deliveries: Deliveries, mut breaker: Option<&mut Breaker>) -> Consumed {
        let Deliveries {
            consumer_tag,
            mut stream,
        } = deliveries;
        let mut in_flight = FuturesUnordered::new();
        let mut failure = None;
        let mut stream_done = false;
        let mut stopping = false;
        let mut tripped = None;
        let stop = self.env.shutdown.wait();
        tokio::pin!(stop);
        while !(stream_done && in_flight.is_empty()) {
            let stop_consuming = tokio::select! {
                next = stream.next(), if !stream_done && (stopping || in_flight.len() < self.spec.effective_concurrency()) => {
                    match next {
                        Some(Ok(delivery)) if stopping => {
                            self.settler.requeue_now(&delivery.acker).await;
                            release(delivery);
                        }
                        Some(Ok(delivery)) => in_flight.push(self.process(delivery)),
                        Some(Err(e)) => {
                            failure.get_or_insert(e);
                            stream_done = true;
                        }
                        None => stream_done = true,
                    }
                    false
                }
                Some(failed) = in_flight.next(), if !in_flight.is_empty() => {
                    match breaker.as_deref_mut().map(|b| b.record(failed)) {
                        Some(BreakerAction::Pause(pause)) if !stopping => {
                            tracing::warn!(
                                "circuit breaker tripped: too many transient failures; not consuming {} for {}ms",
                                self.queue,
                                pause.as_millis()
                            );
                            tripped = Some(pause);
                            self.meters.breaker_open.set(1.0);
                            true
                        }
                        _ => false,
                    }
                }
                _ = &mut stop, if !stopping => true,
            };
            if stop_consuming && !stopping {
                stopping = true;
                if let Err(e) = self.settler.channel().cancel(&consumer_tag).await {
                    tracing::debug!("cancelling the consumer of {}: {e}", self.queue);
                    stream_done = true;
                }
            }
        }
        match tripped {
            Some(pause) if !self.env.shutdown.is_shutdown() && failure.is_none() => {
                Consumed::Tripped(pause)
            }
            _ => Consumed::Ended(failure),
        }
    }

    /// Waits out the breaker's pause, then probes with one message until one
    /// succeeds (or the queue is empty). False on shutdown.
    async fn pause_and_probe(&self, breaker: &mut Breaker, first: Duration) -> bool {
        let mut pause = first;
        loop {
            self.report(Health::Paused(self.spec.queue.clone()));
            tokio::select! {
                _ = self.env.shutdown.wait() => return false,
                _ = tokio::time::sleep(pause) => {}
            }
            breaker.probing();
            let probe = match self.settler.channel().get(&self.spec.queue).await {
                Ok(probe) => probe,
                Err(e) => {
                    tracing::warn!("probing {}: {e}", self.queue);
                    return false;
                }
            };
            let succeeded = match probe {
                // Nothing waits: consume again, and let the breaker judge.
                None => true,
                Some(delivery) => !self.process(delivery).await,
            };
            match breaker.probed(succeeded) {
                BreakerAction::Pause(again) => {
                    tracing::warn!(
                        "the probe failed; not consuming {} for {}ms more",
                        self.queue,
                        again.as_millis()
                    );
                    pause = again;
                }
                _ => return true,
            }
        }
    }

    /// Closes the channel (anything unacknowledged goes back to the queue)
    /// and says why the consumer ended.
    async fn finish(&self, failure: Option<TransportError>) -> Result<(), Error> {
        self.settler.close().await;
        if self.env.shutdown.is_shutdown() {
            return Ok(());
        }
        let queue = self.spec.queue.clone();
        Err(match failure {
            Some(source) => Error::Consume { queue, source },
            None => Error::Cancelled { queue },
        })
    }

    fn report(&self, health: Health) {
        if let Some(sender) = &self.env.health {
            sender.send_replace(health);
        }
    }

    /// One delivery: decode and run the handler, `decide`, settle. True when
    /// it failed transiently (what the circuit breaker counts).
    async fn process(&self, delivery: Delivery) -> bool {
        self.meters.in_flight.increment(1.0);
        let failed_transiently = self.process_one(delivery).await;
        self.meters.in_flight.decrement(1.0);
        failed_transiently
    }

    async fn process_one(&self, delivery: Delivery) -> bool {
        let retry = retry_count_of(&delivery.properties);
        let message_id = delivery
            .properties
            .message_id()
            .as_ref()
            .map_or("-", |s| s.as_str());
        // `queue`, `message_id` and `attempt` for logs; the rest for
        // OpenTelemetry's messaging conventions.
        let span = tracing::info_span!(
            "delivery",
            queue = %self.queue,
            message_id,
            attempt = retry.count.saturating_add(1),
            otel.name = %format_args!("{} process", self.queue),
            otel.kind = "consumer",
            messaging.system = "rabbitmq",
            messaging.operation.type = "process",
            messaging.destination.name = %self.queue,
            messaging.rabbitmq.destination.routing_key = delivery.routing_key.as_str(),
            messaging.message.id = message_id,
        );
        continue_trace(&span, delivery.properties.headers().as_ref());
        async move {
            if let Some(warning) = &retry.warning {
                tracing::warn!("{warning}");
            }
            let depth = header_depth(&delivery.properties);
            if depth > MAX_HEADER_DEPTH {
                // Neither the handler nor a copy touches it: both would recurse
                // through the headers on a task's stack.
                let why = format!("headers nest {depth} levels deep, more than {MAX_HEADER_DEPTH}");
                self.reject(&delivery.acker, &why).await;
                drop_deep(delivery);
                return false;
            }
            let held = match &self.inbox {
                Some(inbox) => match inbox.admit(&delivery, &self.settler).await {
                    Admission::Run(held) => held,
                    Admission::Settled => return false,
                },
                None => None,
            };
            let attempt = Attempt {
                count: retry.count,
                since_first_failure: since_first_failure(&delivery.properties),
            };
            let handled = self
                .run_handler(delivery, retry.count, held.as_deref())
                .await;
            let decision = decide(self.spec.policy(), attempt, &handled.outcome);
            let failed_transiently = matches!(
                handled.outcome,
                Outcome::Failed {
                    verdict: Verdict::Retry | Verdict::Ladder(_) | Verdict::RetryAfter(_),
                    ..
                }
            );
            match (&self.inbox, held) {
                (Some(inbox), Some(held)) => {
                    let settle = self.settle(&handled, decision);
                    inbox
                        .finish(held, &decision, &handled.acker, &self.settler, settle)
                        .await
                }
                _ => {
                    self.settle(&handled, decision).await;
                }
            }
            failed_transiently
        }
        .instrument(span)
        .await
    }

    /// Decodes the body and runs the handler (with its timeout, catching a
    /// panic) into an outcome.
    async fn run_handler(
        &self,
        delivery: Delivery,
        retry_count: u32,
        held: Option<&dyn HeldKey>,
    ) -> Handled {
        let Delivery {
            exchange,
            routing_key,
            redelivered,
            properties,
            data,
            acker,
        } = delivery;
        let ctx = Context {
            queue: Arc::clone(&self.queue),
            exchange,
            routing_key,
            redelivered,
            retry_count,
            properties,
            state: Arc::clone(&self.env.state),
            #[cfg(feature = "postgres")]
            transaction: held.and_then(|held| held.transaction()),
        };
        let mut outcome = self.call(&data, &ctx).await;
        // Immediate retries: in the process, after a short pause, for blips.
        for retry in 1..=self.spec.immediate {
            let Outcome::Failed { verdict, error } = &outcome else {
                break;
            };
            if matches!(verdict, Verdict::DeadLetter | Verdict::Discard) {
                break;
            }
            let pause = IMMEDIATE_PAUSE * retry;
            tracing::info!(
                error = error.as_str(),
                "failed; immediate retry {retry}/{} in {}ms",
                self.spec.immediate,
                pause.as_millis()
            );
            tokio::time::sleep(pause).await;
            if let Some(Err(e)) = OptionFuture::from(held.map(|h| h.restart_attempt())).await {
                tracing::warn!("{e}; the retry's writes may not commit");
            }
            self.meters.immediate_retries.increment(1);
            outcome = self.call(&data, &ctx).await;
        }
        Handled {
            acker,
            body: data,
            ctx,
            outcome,
        }
    }

    /// Decodes the body and runs the handler once, with its timeout,
    /// catching a panic.
    async fn call(&self, data: &[u8], ctx: &Context) -> Outcome {
        let message = match self.consumer.decode(data) {
            Ok(message) => message,
            Err(error) => {
                return Outcome::Undecodable {
                    error: truncate_error(&error),
                };
            }
        };
        let handled = AssertUnwindSafe(self.consumer.handle(message, ctx)).catch_unwind();
        let started = tokio::time::Instant::now();
        let result = match self.spec.handler_timeout {
            None => Some(handled.await),
            Some(limit) => tokio::time::timeout(limit, handled).await.ok(),
        };
        self.meters
            .handler_duration
            .record(started.elapsed().as_secs_f64());
        match result {
            None => Outcome::Failed {
                verdict: Verdict::Retry,
                error: format!(
                    "handler timed out after {}ms",
                    self.spec.handler_timeout.map_or(0, |t| t.as_millis())
                ),
            },
            Some(Ok(Ok(()))) => Outcome::Success,
            Some(Ok(Err(e))) => Outcome::Failed {
                verdict: e.verdict(),
                error: truncate_error(&e.to_string()),
            },
            Some(Err(panic)) => Outcome::Failed {
                verdict: Verdict::Retry,
                error: truncate_error(&panic_message(panic.as_ref())),
            },
        }
    }

    /// Carries out the decision against the broker; true when done (false:
    /// the delivery was requeued, or the broker will redeliver it).
    async fn settle(&self, handled: &Handled, decision: Decision) -> bool {
        let error = handled.error();
        match decision {
            Decision::Ack => {
                let acked = self.settler.ack(&handled.acker).await;
                if acked {
                    self.meters.handled.increment(1);
                    self.meters.settled(*handled.ctx.properties.timestamp());
                    tracing::debug!("handled; acked");
                }
                acked
            }
            Decision::Discard => {
                let acked = self.settler.ack(&handled.acker).await;
                if acked {
                    self.meters.discarded.increment(1);
                    tracing::info!(
                        error,
                        "failed; discarded (the error says the message is obsolete)"
                    );
                }
                acked
            }
            Decision::Retry {
                delay_ms,
                next_count,
            } => {
                let count = (headers::RETRY_COUNT, HeaderValue::Int(next_count.into()));
                let properties = copy_properties(&handled.ctx, &[count]);
                let target = self.retry_target(delay_ms);
                let copied = self.copy_then_ack(handled, &target, properties).await;
                if copied {
                    self.meters.retried(delay_ms);
                    tracing::warn!(
                        error,
                        "failed (transient); retry {next_count}/{} in {}",
                        self.spec.delays.len(),
                        target.queue,
                    );
                }
                copied
            }
            Decision::DeadLetter { reason } => {
                let dead_letter = self.dead_letter(handled, reason, error.to_owned());
                let properties = copy_properties(&handled.ctx, &dead_letter.headers());
                let copied = self
                    .copy_then_ack(handled, &self.dead_letter_target(), properties)
                    .await;
                if copied {
                    self.meters.dead_lettered(reason);
                    self.meters.settled(*handled.ctx.properties.timestamp());
                    tracing::warn!(
                        error,
                        "failed ({reason}); dead-lettered to {}",
                        self.topology.dead_letter_queue.name
                    );
                }
                copied
            }
        }
    }

    /// The retry queue of a tier of `delay_ms`: its own, or with jitter one
    /// of its sub-queues at random.
    fn retry_target(&self, delay_ms: u64) -> Target<'_> {
        let ms = self.spec.jittered(delay_ms, fastrand::f64());
        // Every delay a decision can return has a declared queue; the
        // consumer's first tier is the safe fallback.
        let index = self.retry_delays.iter().position(|&d| d == ms).unwrap_or(0);
        let queue = &self.topology.retry_queues[index].name;
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

    /// The failure headers of a dead letter of this delivery.
    fn dead_letter(
        &self,
        handled: &Handled,
        reason: DeadLetterReason,
        error: String,
    ) -> DeadLetter {
        DeadLetter {
            reason,
            retry_count: handled.ctx.retry_count,
            error,
            failed_at: now_rfc3339(),
            queue: self.spec.queue.clone(),
            exchange: handled.ctx.exchange.clone(),
            routing_key: handled.ctx.routing_key.clone(),
        }
    }

    /// Publishes the copy, shrunk to fit one frame with room for what the
    /// broker adds, and acks the original once confirmed. True when confirmed.
    async fn copy_then_ack(
        &self,
        handled: &Handled,
        target: &Target<'_>,
        properties: lapin::BasicProperties,
    ) -> bool {
        match self.settler.fit(properties, target) {
            Ok(properties) => {
                self.settler
                    .republish_then_ack(&handled.acker, target, &handled.body, properties)
                    .await
            }
            Err(too_large) => {
                self.settle_oversized(handled, too_large).await;
                false
            }
        }
    }

    /// No copy of this delivery with its own headers fits. When the broker
    /// can still dead-letter it (adding `x-death`) within the frame, reject
    /// it into the dead-letter queue as it is; otherwise dead-letter a copy
    /// without its largest headers, which `x-dropped-headers` names.
    async fn settle_oversized(&self, handled: &Handled, too_large: TooLarge) {
        let frame_max = self.settler.frame_max();
        let size = content_header_len(&handled.ctx.properties);
        let ctx = &handled.ctx;
        let headroom = broker_headroom(&self.spec.queue, &ctx.exchange, &ctx.routing_key);
        let why = format!(
            "a copy would need {} bytes of properties and headers, more than the {} allowed \
             in a frame of {frame_max}, even with the framework's own headers shrunk",
            too_large.size, too_large.limit
        );
        if size + headroom <= header_limit(frame_max) {
            return self.reject(&handled.acker, &why).await;
        }
        let error = format!(
            "{why}; the message itself takes {size} bytes, too close to the frame for the \
             broker to dead-letter it either. Its failure: {}",
            handled.error()
        );
        let dead_letter =
            self.dead_letter(handled, DeadLetterReason::Oversized, truncate_error(&error));
        let properties = republish_properties(&ctx.properties, &dead_letter.headers());
        let target = self.dead_letter_target();
        match without_largest_headers(properties, self.settler.copy_limit(&target)) {
            Some((properties, dropped)) => {
                let (acker, body) = (&handled.acker, &handled.body);
                if self
                    .settler
                    .republish_then_ack(acker, &target, body, properties)
                    .await
                {
                    self.meters.dead_lettered(DeadLetterReason::Oversized);
                    tracing::error!(
                        "{why}; dead-lettered to {} without the headers {}",
                        target.queue,
                        dropped.join(", ")
                    );
                }
            }
            None => self.reject(&handled.acker, &why).await,
        }
    }

    async fn reject(&self, acker: &Acker, why: &str) {
        let dead_letter_queue = &self.topology.dead_letter_queue.name;
        self.settler.reject(acker, why, dead_letter_queue).await;
    }
}

/// How long ago the message first failed, from `x-first-failed-at`.
fn since_first_failure(properties: &lapin::BasicProperties) -> Option<std::time::Duration> {
    let value = properties
        .headers()
        .as_ref()?
        .inner()
        .get(headers::FIRST_FAILED_AT)?;
    let HeaderValue::Str(text) = header_view(value) else {
        return None;
    };
    let first = parse_failed_at(text)?;
    Some(clock::now().duration_since(first).unwrap_or_default())
}

/// Now, for `x-first-failed-at` on the first copy of a message that had not
/// failed before; `None` when it carries one already (the copy keeps it).
fn first_failure(ctx: &Context) -> Option<String> {
    let known = ctx
        .headers()
        .is_some_and(|h| h.contains_key(headers::FIRST_FAILED_AT));
    (!known).then(now_rfc3339)
}

/// The properties of a copy: the original's, with `set` and, on a first
/// failure, `x-first-failed-at`.
fn copy_properties(
    ctx: &Context,
    set: &[(&'static str, HeaderValue<'_>)],
) -> lapin::BasicProperties {
    match first_failure(ctx) {
        None => republish_properties(&ctx.properties, set),
        Some(now) => {
            let mut all = set.to_vec();
            all.push((headers::FIRST_FAILED_AT, HeaderValue::Str(&now)));
            republish_properties(&ctx.properties, &all)
        }
    }
}

/// Declares (or, with `declare = "passive"`, checks) the topology again: an
/// unroutable copy means a retry or dead-letter queue or its binding is gone.
fn repair(connection: &Arc<dyn Connection>, topology: &Topology, spec: &ConsumerSpec) -> Repair {
    let (connection, topology, mode) = (Arc::clone(connection), topology.clone(), spec.declare);
    Arc::new(move || {
        let (connection, topology) = (Arc::clone(&connection), topology.clone());
        Box::pin(async move {
            let queue = &topology.work_queue.name;
            match establish_topology(&*connection, &topology, mode).await {
                Ok(()) => tracing::warn!("topology of {queue} declared or checked again"),
                Err(e) => tracing::error!("the topology of {queue} again: {e}"),
            }
        })
    })
}
