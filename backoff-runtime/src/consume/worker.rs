//! The consumer loop: one per consumer, on its own confirm channel. Each
//! delivery is decoded, handled, decided on (by `backoff-core`) and settled.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, Either};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use rabbit_backoff_core::{
    Attempt, Breaker, BreakerAction, ConsumerSpec, Outcome, RetryBackend, RetryCount, Verdict,
    decide,
};
use tracing::Instrument;

use crate::broker::confirm_channel::confirm_channel;
use crate::broker::index_writer::IndexWriter;
use crate::consume::consumer::Consumer;
use crate::consume::context::Context;
use crate::consume::dedupe::{Admission, Inbox, StoreReport};
use crate::consume::extract::transaction_requirement;
use crate::consume::retry_count::count_in;
use crate::consume::shutdown::ShutdownHandle;
use crate::consume::state::StateMap;
use crate::dedupe::{DedupeStore, HeldKey};
use crate::error::{Error, channel_error};
use crate::settle::acks::{ACK_LINGER, Acks};
use crate::settle::executor::{Executor, Original};
use crate::telemetry::meters::Meters;
use crate::telemetry::trace_context::delivery_span;
use crate::transport::frame_guard::SetAside;
use crate::transport::{Acker, Channel, Connection, Deliveries, Delivery, TransportError};

/// Where a consumer says that its circuit breaker paused it (`Some`, with
/// its queue) or that it consumes again (`None`).
pub(crate) type PauseReport = Arc<dyn Fn(Option<&str>) + Send + Sync>;

/// Settings shared by every worker of a runtime.
#[derive(Clone)]
pub(crate) struct WorkerEnv {
    pub(crate) connection: Arc<dyn Connection>,
    pub(crate) state: Arc<StateMap>,
    pub(crate) confirm_timeout: Duration,
    pub(crate) shutdown: ShutdownHandle,
    pub(crate) paused: Option<PauseReport>,
    /// Where an inbox says that its dedupe store stopped or started
    /// answering.
    pub(crate) store_report: Option<StoreReport>,
    /// The inbox of the consumers with `dedupe`.
    pub(crate) dedupe_store: Option<Arc<dyn DedupeStore>>,
    /// Where the consumers that write their dead-letter index hand each
    /// dead letter.
    pub(crate) index_writer: Option<IndexWriter>,
}

/// How consuming ended.
enum Consumed {
    /// Shutdown, a cancelled consumer or a failed channel (the error).
    Ended(Option<TransportError>),
    /// The circuit breaker tripped: pause this long, then probe.
    Tripped(Duration),
}

/// One consumer's running loop.
pub(crate) struct Worker<C: Consumer> {
    pub(super) consumer: Arc<C>,
    pub(super) spec: ConsumerSpec,
    queue: Arc<str>,
    /// Carries out what `decide` says, on the consumer's channel.
    executor: Executor,
    /// The acknowledgements of the consumer's channel, which the loop
    /// flushes and the executor settles through.
    acks: Arc<Acks>,
    /// The consumer's metrics, shared with the executor.
    pub(super) meters: Arc<Meters>,
    /// The channel the deliveries come from: the executor's, or with
    /// `retry = "scheduled"` one whose deliveries can be held back.
    consuming: Arc<dyn Channel>,
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
        // Copies (retries to tiers, dead letters) go out on a confirm channel.
        let channel = confirm_channel(&*env.connection, &spec.queue).await?;
        let consuming = if spec.retry == RetryBackend::Scheduled {
            // The broker holds a retry back: no copy goes out.
            env.connection
                .open_holding_channel()
                .await
                .map_err(channel_error(
                    &spec.queue,
                    "opening a channel whose deliveries can be held back",
                ))?
        } else {
            Arc::clone(&channel)
        };
        consuming
            .qos(spec.prefetch)
            .await
            .map_err(channel_error(&spec.queue, "setting the prefetch"))?;
        let deliveries = consuming
            .consume(&spec.queue)
            .await
            .map_err(channel_error(&spec.queue, "starting to consume"))?;
        let acks = Arc::new(Acks::for_prefetch(spec.prefetch));
        let meters = Arc::new(Meters::of(&spec));
        let executor = Executor::new(
            channel,
            &env.connection,
            env.confirm_timeout,
            &spec,
            env.index_writer.as_ref(),
            (&acks, &meters),
        );
        let takes_transaction =
            transaction_requirement().is_some_and(|tx| consumer.required_state().contains(&tx));
        let inbox = Inbox::new(
            &spec,
            takes_transaction,
            env.dedupe_store.as_ref(),
            env.confirm_timeout,
            env.store_report.clone(),
        );
        let worker = Worker {
            consuming,
            inbox,
            queue: Arc::from(spec.queue.as_str()),
            consumer,
            spec,
            executor,
            acks,
            meters,
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
            self.report(None);
            self.meters.breaker_open(false);
            deliveries = self
                .consuming
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
        let acks = &self.acks;
        let mut in_flight = FuturesUnordered::new();
        // Deliveries handed back while stopping, and flushes of
        // acknowledgements that waited long enough: polled beside the
        // handlers, never awaited in the loop, which would stop polling a
        // handler whose settling they wait for.
        let mut chores: FuturesUnordered<BoxFuture<'_, ()>> = FuturesUnordered::new();
        let linger = tokio::time::sleep(ACK_LINGER);
        tokio::pin!(linger);
        let mut lingering = false;
        // A flush made because the window is full and nothing else is ready.
        let mut flushing: Option<BoxFuture<'_, ()>> = None;
        let window = usize::from(self.spec.prefetch);
        let mut failure = None;
        let mut stream_done = false;
        let mut stopping = false;
        let mut tripped = None;
        let stop = self.env.shutdown.wait();
        tokio::pin!(stop);
        while !(stream_done && in_flight.is_empty() && chores.is_empty() && flushing.is_none()) {
            // Every branch but the last is polled in order; the last is
            // taken only when none of the others is ready.
            let stop_consuming = tokio::select! {
                biased;
                _ = &mut stop, if !stopping => true,
                Some(failed) = in_flight.next(), if !in_flight.is_empty() => {
                    if in_flight.is_empty() && acks.waiting() > 0 {
                        // Nothing is being handled: no delivery can join the
                        // run, and the broker may be waiting for these acks
                        // to send more. Acknowledge now rather than linger.
                        chores.push(Box::pin(acks.flush()));
                    } else if !lingering && acks.waiting() > 0 {
                        linger.as_mut().reset(tokio::time::Instant::now() + ACK_LINGER);
                        lingering = true;
                    }
                    match breaker.as_deref_mut().map(|b| b.record(failed)) {
                        Some(BreakerAction::Pause(pause)) if !stopping => {
                            tracing::warn!(
                                "circuit breaker tripped: too many transient failures; not consuming {} for {}ms",
                                self.queue,
                                pause.as_millis()
                            );
                            tripped = Some(pause);
                            self.meters.breaker_open(true);
                            true
                        }
                        _ => false,
                    }
                }
                () = async { flushing.as_mut().expect("a flush").await }, if flushing.is_some() => {
                    flushing = None;
                    false
                }
                next = stream.next(), if !stream_done && (stopping || in_flight.len() < self.spec.effective_concurrency()) => {
                    match next {
                        Some(Ok(delivery)) => {
                            acks.received(delivery.acker.delivery_tag());
                            if stopping {
                                chores.push(Box::pin(self.hand_back(delivery)));
                            } else {
                                in_flight.push(self.process(delivery));
                            }
                        }
                        Some(Err(e)) => {
                            failure.get_or_insert(e);
                            stream_done = true;
                        }
                        None => stream_done = true,
                    }
                    false
                }
                Some(()) = chores.next(), if !chores.is_empty() => {
                    // A lingering flush may leave some held back: look again later.
                    if !lingering && acks.waiting() > 0 {
                        linger.as_mut().reset(tokio::time::Instant::now() + ACK_LINGER);
                        lingering = true;
                    }
                    false
                }
                () = &mut linger, if lingering => {
                    lingering = false;
                    chores.push(Box::pin(acks.flush_lingering()));
                    false
                }
                () = std::future::ready(()), if flushing.is_none()
                    && acks.waiting() > 0
                    && in_flight.len() + acks.waiting() >= window
                    && acks.run_ready() =>
                {
                    // The window is full, so the broker sends nothing more
                    // until acks go out, and no handler is ready to finish:
                    // acknowledge what finished now rather than at the batch
                    // or the linger (a copy's original goes out with the
                    // confirms that arrived together with its own).
                    flushing = Some(Box::pin(acks.flush_run()));
                    false
                }
            };
            if stop_consuming && !stopping {
                stopping = true;
                if let Err(e) = self.consuming.cancel(&consumer_tag).await {
                    tracing::debug!("cancelling the consumer of {}: {e}", self.queue);
                    stream_done = true;
                }
            }
        }
        // What finished is acknowledged before pausing or closing.
        acks.flush().await;
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
            self.report(Some(&self.spec.queue));
            tokio::select! {
                _ = self.env.shutdown.wait() => return false,
                _ = tokio::time::sleep(pause) => {}
            }
            breaker.probing();
            let probe = match self.consuming.get(&self.spec.queue).await {
                Ok(probe) => probe,
                Err(e) => {
                    tracing::warn!("probing {}: {e}", self.queue);
                    return false;
                }
            };
            let succeeded = match probe {
                // Nothing waits: consume again, and let the breaker judge.
                None => true,
                Some(delivery) => {
                    let acks = &self.acks;
                    acks.received(delivery.acker.delivery_tag());
                    let failed = self.process(delivery).await;
                    acks.flush().await;
                    !failed
                }
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
        if self.spec.retry == RetryBackend::Scheduled {
            self.consuming.close().await;
        }
        self.executor.close().await;
        if self.env.shutdown.is_shutdown() {
            return Ok(());
        }
        let queue = self.spec.queue.clone();
        Err(match failure {
            Some(source) => Error::Consume { queue, source },
            None => Error::Cancelled { queue },
        })
    }

    /// Gives a delivery that arrived while stopping back to its queue at once.
    async fn hand_back(&self, delivery: Delivery) {
        let Delivery {
            acker,
            data,
            properties,
            ..
        } = delivery;
        self.executor.requeue_now(acker, &data, &properties).await;
    }

    fn report(&self, paused: Option<&str>) {
        if let Some(report) = &self.env.paused {
            report(paused);
        }
    }

    /// One delivery: decode and run the handler, `decide`, settle. True when
    /// it failed transiently (what the circuit breaker counts).
    ///
    /// Not an `async fn`, nor are the two below: each takes the delivery
    /// apart before its future exists, so that the future (one per delivery
    /// in flight) holds each part once.
    fn process(&self, delivery: Delivery) -> impl Future<Output = bool> + Send + '_ {
        let meters = &self.meters;
        meters.in_flight(true);
        // A combinator, not an `async` block: awaiting the future from a
        // block would hold it twice.
        self.process_one(delivery).map(move |failed_transiently| {
            meters.in_flight(false);
            failed_transiently
        })
    }

    /// The delivery in its span.
    fn process_one(&self, delivery: Delivery) -> impl Future<Output = bool> + Send + '_ {
        let retry = count_in(&delivery.properties, self.spec.retry.count_header());
        let span = delivery_span(&self.queue, &delivery, retry.count);
        // Without a subscriber that records it, the span is not entered at
        // every poll.
        if span.is_disabled() {
            Either::Left(self.handle(delivery, retry))
        } else {
            let _entered = span.enter();
            Either::Right(self.handle(delivery, retry).instrument(span.clone()))
        }
    }

    /// Runs the handler, `decide`s, and has the executor carry out the
    /// decision.
    fn handle(
        &self,
        delivery: Delivery,
        retry: RetryCount,
    ) -> Either<impl Future<Output = bool> + Send + '_, BoxFuture<'_, bool>> {
        if let Some(warning) = &retry.warning {
            tracing::warn!("{warning}");
        }
        if let Some(set_aside) = SetAside::of(&delivery.properties) {
            // Headers too deep for lapin, set aside by the connection's frame
            // guard: the broker dead-letters the intact original.
            return Either::Right(Box::pin(async move {
                self.executor
                    .reject(&delivery.acker, &set_aside.to_string())
                    .await;
                false
            }));
        }
        if let Some(inbox) = &self.inbox {
            // A store's round trip costs more than the box.
            return Either::Right(Box::pin(self.handle_deduped(inbox, delivery, retry)));
        }
        let (attempt, ctx, data, acker) = self.take_apart(delivery, retry.count, None);
        Either::Left(async move {
            let outcome = self.run_handler(&data, &ctx, None).await;
            let decision = decide(self.spec.policy(), attempt, &outcome);
            let (failed_transiently, error) = failure(&outcome);
            let original = original(&data, &ctx, error);
            self.executor.execute(acker, &original, decision).await;
            failed_transiently
        })
    }

    /// A delivery taken apart: the attempt `decide` weighs, the context its
    /// handler sees (with the inbox claim's transaction, if any), its body
    /// and its acker.
    fn take_apart(
        &self,
        delivery: Delivery,
        retry_count: u32,
        #[cfg_attr(not(feature = "postgres"), allow(unused_variables))] held: Option<&dyn HeldKey>,
    ) -> (Attempt, Context, Vec<u8>, Acker) {
        // Only a `max_age` weighs the age: without one, no delivery's
        // headers are read for it.
        let age = self
            .spec
            .max_age
            .and_then(|_| self.executor.since_first_failure(&delivery.properties));
        let attempt = Attempt::count(retry_count).with_since_first_failure(age);
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
        (attempt, ctx, data, acker)
    }

    /// [`handle`](Self::handle) through the inbox: the key is claimed
    /// before the handler runs (a duplicate is acked without it), and
    /// completed or released as the decision is carried out.
    async fn handle_deduped(&self, inbox: &Inbox, delivery: Delivery, retry: RetryCount) -> bool {
        let (held, delivery) = match inbox.admit(delivery, &self.executor).await {
            Admission::Run(held, delivery) => (held, delivery),
            Admission::Settled => return false,
        };
        let (attempt, ctx, data, acker) = self.take_apart(delivery, retry.count, held.as_deref());
        let outcome = self.run_handler(&data, &ctx, held.as_deref()).await;
        let decision = decide(self.spec.policy(), attempt, &outcome);
        let (failed_transiently, error) = failure(&outcome);
        let original = original(&data, &ctx, error);
        match held {
            Some(held) => {
                let settle = |acker| self.executor.execute(acker, &original, decision);
                inbox
                    .finish(held, &decision, (acker, &original), &self.executor, settle)
                    .await;
            }
            None => {
                self.executor.execute(acker, &original, decision).await;
            }
        }
        failed_transiently
    }
}

/// A handled delivery as the executor settles it.
fn original<'a>(body: &'a [u8], ctx: &'a Context, error: &'a str) -> Original<'a> {
    Original {
        body,
        properties: &ctx.properties,
        exchange: &ctx.exchange,
        routing_key: &ctx.routing_key,
        retry_count: ctx.retry_count,
        error,
    }
}

/// Whether `outcome` is a transient failure (what the circuit breaker
/// counts), and its error (empty on success).
fn failure(outcome: &Outcome) -> (bool, &str) {
    match outcome {
        Outcome::Success => (false, ""),
        Outcome::Failed { verdict, error } => (
            matches!(
                verdict,
                Verdict::Retry | Verdict::Ladder(_) | Verdict::RetryAfter(_)
            ),
            error.as_str(),
        ),
        Outcome::Undecodable { error } => (false, error.as_str()),
        // Not reached with the core pinned exactly (`=0.1.0`); `Outcome`
        // is `#[non_exhaustive]` for services, so Rust wants this arm.
        _ => (false, ""),
    }
}
