//! The consumer loop: one per consumer, on its own confirm channel.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use backoff_core::{
    Classify, ConsumerSpec, DeadLetter, Decision, HeaderValue, Outcome, Topology, decide, headers,
    truncate_error,
};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use lapin::Acker;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection};
use tracing::Instrument;

use crate::amqp::short;
use crate::delivery::{now_rfc3339, panic_message, republish_properties, retry_count_of};
use crate::publish::{channel_error, confirm_channel, publish_confirmed};
use crate::state::StateMap;
use crate::topology::establish_topology;
use crate::{Consumer, Context, Error, PublishFailure, ShutdownHandle};

/// How long a message whose republish failed is held before it is requeued,
/// so that a broken retry or dead-letter route never turns into a hot loop.
const REQUEUE_PAUSE: Duration = Duration::from_secs(1);

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
                        Some(Ok(delivery)) if stopping => requeue_unstarted(&delivery.acker).await,
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
                let key = &self.retry_keys[tier];
                if self
                    .republish_then_ack(&acker, &self.retry_exchange, key, &data, properties)
                    .await
                {
                    tracing::warn!(
                        error,
                        "failed (transient); retry {next_count}/{} after {}ms in {}",
                        self.spec.delays.len(),
                        self.spec.delays.as_millis()[tier],
                        key,
                    );
                }
            }
            Decision::DeadLetter { reason } => {
                let dead_letter = DeadLetter {
                    reason,
                    retry_count: count,
                    error: error.to_owned(),
                    failed_at: now_rfc3339(),
                    queue: self.spec.queue.clone(),
                    exchange: ctx.exchange.clone(),
                    routing_key: ctx.routing_key.clone(),
                };
                let properties = republish_properties(&ctx.properties, &dead_letter.headers());
                let (exchange, key) = (&self.dead_letter_exchange, &self.dead_letter_key);
                if self
                    .republish_then_ack(&acker, exchange, key, &data, properties)
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

    /// Publishes the copy and acks the original once the broker confirmed it;
    /// otherwise requeues the original. True when the copy was confirmed.
    async fn republish_then_ack(
        &self,
        acker: &Acker,
        exchange: &ShortString,
        routing_key: &ShortString,
        body: &[u8],
        properties: BasicProperties,
    ) -> bool {
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
