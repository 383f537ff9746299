use clap::Args;
use rabbit_backoff::topology::NameOverrides;
use rabbit_backoff::{
    ConsumerSpec, Delays, ExchangeKind, Jitter, QueueType, RetryBackend, RetryReturn,
};

/// Names one consumer's topology, as `#[backoff_consumer]` does.
#[derive(Debug, Clone, Args)]
pub struct ConsumerArgs {
    /// The work queue; every default name derives from it.
    #[arg(long, value_name = "QUEUE")]
    pub queue: String,
    /// The retry schedule, e.g. 5s,15s,60s or "exponential(100ms, x2, 4)"
    /// (names the current retry tiers).
    #[arg(long, value_name = "DELAYS")]
    pub delays: Option<Delays>,
    /// The work exchange [default: <queue>].
    #[arg(long, value_name = "NAME")]
    pub exchange: Option<String>,
    /// The work exchange's type.
    #[arg(long, value_name = "TYPE", default_value = "direct")]
    pub exchange_type: ExchangeKind,
    /// The key binding the work queue to the work exchange [default: <queue>].
    #[arg(long, value_name = "KEY")]
    pub work_routing_key: Option<String>,
    /// The retry exchange [default: <queue>.retry].
    #[arg(long, value_name = "NAME")]
    pub retry_exchange: Option<String>,
    /// The retry queue pattern, with {ms} [default: <queue>.retry_{ms}ms].
    #[arg(long, value_name = "PATTERN")]
    pub retry_queue: Option<String>,
    /// The dead-letter exchange [default: <queue>.dlx].
    #[arg(long, value_name = "NAME")]
    pub dead_letter_exchange: Option<String>,
    /// The dead-letter queue [default: <queue>.dlq].
    #[arg(long, value_name = "NAME")]
    pub dead_letter_queue: Option<String>,
    /// The key binding the dead-letter queue [default: <queue>.dlq].
    #[arg(long, value_name = "KEY")]
    pub dead_letter_routing_key: Option<String>,
    /// Where an expired retry goes: queue (the default exchange, straight to
    /// the work queue) or exchange (the work exchange with the work routing
    /// key, as the article's topology declares its retry queues).
    #[arg(long, value_name = "ROUTE", default_value = "queue")]
    pub retry_return: RetryReturn,
    /// quorum (the attribute's default) or classic.
    #[arg(long, value_name = "TYPE", default_value = "quorum")]
    pub queue_type: QueueType,
    /// x-delivery-limit of a quorum work queue.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub delivery_limit: u32,
    /// Jitter of the retry tiers, e.g. 20% (five sub-queues per tier).
    #[arg(long, value_name = "PERCENT")]
    pub jitter: Option<Jitter>,
    /// How retries wait: tiers (a TTL retry queue per delay), delayed
    /// (RabbitMQ 4.3's delayed retries of the quorum work queue) or
    /// scheduled (RabbitMQ 4.3 holds each retry back until the time the
    /// consumer names); with either of the last two there is no retry
    /// queue, and `status` shows the messages the work queue holds back.
    #[arg(long, value_name = "BACKEND", default_value = "tiers")]
    pub retry: RetryBackend,
}

impl ConsumerArgs {
    /// The spec these flags describe. Without `--delays`, the schedule is a
    /// placeholder and `has_delays` is false.
    pub fn spec(&self) -> Result<ConsumerSpec, String> {
        let delays = match &self.delays {
            Some(delays) => delays.clone(),
            None => Delays::from_millis(vec![1]).map_err(|e| e.to_string())?,
        };
        let mut spec = ConsumerSpec::new(self.queue.clone(), delays);
        spec.exchange_kind = self.exchange_type;
        spec.queue_type = Some(self.queue_type);
        spec.delivery_limit = self.delivery_limit;
        spec.retry_return = self.retry_return;
        spec.jitter = self.jitter;
        spec.retry = self.retry;
        spec.names = NameOverrides::default();
        spec.names.exchange = self.exchange.clone();
        spec.names.routing_key = self.work_routing_key.clone();
        spec.names.retry_exchange = self.retry_exchange.clone();
        spec.names.retry_queue = self.retry_queue.clone();
        spec.names.dead_letter_exchange = self.dead_letter_exchange.clone();
        spec.names.dead_letter_queue = self.dead_letter_queue.clone();
        spec.names.dead_letter_routing_key = self.dead_letter_routing_key.clone();
        spec.validate()
            .map_err(|e| format!("consumer `{}`: {e}", self.queue))?;
        Ok(spec)
    }
}
