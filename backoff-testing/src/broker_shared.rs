//! The broker's shared state: exchanges, queues and bindings, injected
//! faults and the clock; publishing and dead-lettering.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::BasicProperties;
use lapin::types::FieldTable;
use rabbit_backoff_core::{Binding, ExchangeKind, QueueDecl};
use tokio::time::Instant;

use rabbit_backoff_runtime::transport::{Confirm, QueueInfo, TransportError};

use crate::death::{self, DeathEvent, Reason};
use crate::exchange::Exchange;
use crate::lock::{lock, read, write};
use crate::queue::{DeadLetter, DeadLetterRouter, Queue};
use crate::queue_config::{QueueConfig, assert_equivalent};
use crate::release::Release;
use crate::replies;
use crate::stored_message::Stored;

/// Everything one in-memory broker holds. Exchanges and queues live in
/// `topology` (read-locked to route, write-locked to declare); each queue
/// has its own lock for its messages.
pub(crate) struct BrokerShared {
    pub(crate) topology: RwLock<Topology>,
    faults: Mutex<Faults>,
    faults_armed: AtomicBool,
    /// Fault: metadata probes get no answer, as on a node cut off from its
    /// cluster's majority.
    pub(crate) majority_lost: AtomicBool,
    clock: Clock,
    ids: AtomicU64,
    /// The release it behaves as.
    pub(crate) release: Release,
}

/// Exchanges and queues by name.
pub(crate) struct Topology {
    pub(crate) exchanges: HashMap<String, Exchange>,
    pub(crate) queues: HashMap<String, Arc<Queue>>,
}

/// Faults a test asked for, consumed as publishes meet them.
#[derive(Default)]
struct Faults {
    nack_to: HashMap<String, u64>,
    return_to: HashMap<String, u64>,
    fail_publishes: u64,
}

impl Faults {
    fn is_empty(&self) -> bool {
        self.nack_to.is_empty() && self.return_to.is_empty() && self.fail_publishes == 0
    }
}

/// Wall-clock time that follows tokio's clock, so that `x-death` times
/// advance with paused time.
struct Clock {
    system: SystemTime,
    instant: Instant,
}

impl Clock {
    fn unix_seconds(&self) -> u64 {
        let now = self.system + Instant::now().saturating_duration_since(self.instant);
        now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
    }
}

impl BrokerShared {
    pub(crate) fn new(release: Release) -> Self {
        let mut exchanges = HashMap::new();
        for (name, kind) in [
            ("amq.direct", ExchangeKind::Direct),
            ("amq.fanout", ExchangeKind::Fanout),
            ("amq.topic", ExchangeKind::Topic),
            ("amq.headers", ExchangeKind::Headers),
            ("amq.match", ExchangeKind::Headers),
        ] {
            exchanges.insert(name.to_owned(), Exchange::new(kind));
        }
        BrokerShared {
            topology: RwLock::new(Topology {
                exchanges,
                queues: HashMap::new(),
            }),
            faults: Mutex::new(Faults::default()),
            faults_armed: AtomicBool::new(false),
            majority_lost: AtomicBool::new(false),
            clock: Clock {
                system: SystemTime::now(),
                instant: Instant::now(),
            },
            ids: AtomicU64::new(0),
            release,
        }
    }

    /// A number unique in this broker (connections, channels, consumers).
    pub(crate) fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        read(&self.topology).queues.get(name).cloned()
    }

    pub(crate) fn declare_exchange(
        &self,
        name: &str,
        kind: ExchangeKind,
    ) -> Result<(), TransportError> {
        if name.is_empty() {
            return Err(replies::access_refused(
                "operation not permitted on the default exchange",
            ));
        }
        let mut topology = write(&self.topology);
        match topology.exchanges.get(name) {
            Some(existing) if existing.kind == kind => Ok(()),
            Some(existing) => Err(replies::inequivalent_exchange_type(
                name,
                kind.as_str(),
                existing.kind.as_str(),
            )),
            None if name.starts_with("amq.") => Err(replies::access_refused(format_args!(
                "exchange name '{name}' contains reserved prefix 'amq.*'"
            ))),
            None => {
                topology
                    .exchanges
                    .insert(name.to_owned(), Exchange::new(kind));
                Ok(())
            }
        }
    }

    pub(crate) fn declare_queue(
        self: &Arc<Self>,
        decl: &QueueDecl,
    ) -> Result<QueueInfo, TransportError> {
        let name = decl.name.as_str();
        let config = QueueConfig::parse(name, &decl.arguments, self.release)?;
        let queue = {
            let mut topology = write(&self.topology);
            match topology.queues.get(name) {
                Some(existing) => {
                    assert_equivalent(name, &existing.arguments, &decl.arguments)?;
                    Arc::clone(existing)
                }
                None if name.starts_with("amq.") => {
                    return Err(replies::access_refused(format_args!(
                        "queue name '{name}' contains reserved prefix 'amq.*'"
                    )));
                }
                None => {
                    let router: Weak<dyn DeadLetterRouter> = Arc::downgrade(self) as Weak<Self>;
                    let queue = Arc::new(Queue::new(name, config, decl.arguments.clone(), router));
                    topology.queues.insert(name.to_owned(), Arc::clone(&queue));
                    queue
                }
            }
        };
        Ok(queue.info())
    }

    pub(crate) fn bind_queue(&self, binding: &Binding) -> Result<(), TransportError> {
        let (queue, exchange) = (binding.queue.as_str(), binding.exchange.as_str());
        let routing_key = binding.routing_key.as_str();
        if exchange.is_empty() {
            return Err(replies::access_refused(
                "operation not permitted on the default exchange",
            ));
        }
        let mut topology = write(&self.topology);
        if !topology.queues.contains_key(queue) {
            return Err(replies::not_found("queue", queue));
        }
        match topology.exchanges.get_mut(exchange) {
            Some(x) => {
                x.bind(queue, routing_key);
                Ok(())
            }
            None => Err(replies::not_found("exchange", exchange)),
        }
    }

    pub(crate) fn check_exchange(&self, name: &str) -> Result<(), TransportError> {
        if name.is_empty() || read(&self.topology).exchanges.contains_key(name) {
            Ok(())
        } else {
            Err(replies::not_found("exchange", name))
        }
    }

    /// Deletes a queue, its messages and its bindings.
    pub(crate) fn delete_queue(&self, name: &str) {
        let mut topology = write(&self.topology);
        topology.queues.remove(name);
        for exchange in topology.exchanges.values_mut() {
            exchange.bindings.retain(|binding| binding.queue != name);
        }
    }

    /// Drops the ready messages of a queue; how many; `NOT_FOUND` when it
    /// does not exist.
    pub(crate) fn purge_queue(&self, name: &str) -> Result<u32, TransportError> {
        match self.queue(name) {
            Some(queue) => Ok(u32::try_from(queue.purge()).unwrap_or(u32::MAX)),
            None => Err(replies::not_found("queue", name)),
        }
    }

    pub(crate) fn check_queue(&self, name: &str) -> Result<QueueInfo, TransportError> {
        match self.queue(name) {
            Some(queue) => Ok(queue.info()),
            None => Err(replies::not_found("queue", name)),
        }
    }

    /// The queues a message reaches; `NOT_FOUND` when the exchange does not
    /// exist. The default exchange (`""`) reaches the queue named by the key.
    fn route(
        &self,
        exchange: &str,
        routing_key: &str,
        headers: Option<&FieldTable>,
    ) -> Result<Vec<Arc<Queue>>, TransportError> {
        let topology = read(&self.topology);
        if exchange.is_empty() {
            return Ok(topology
                .queues
                .get(routing_key)
                .cloned()
                .into_iter()
                .collect());
        }
        let Some(x) = topology.exchanges.get(exchange) else {
            return Err(replies::not_found("exchange", exchange));
        };
        let mut names = Vec::new();
        x.route(routing_key, headers, &mut names);
        Ok(names
            .into_iter()
            .filter_map(|name| topology.queues.get(name).cloned())
            .collect())
    }

    /// Publishes with `mandatory`, as a channel in confirm mode does, and
    /// returns the confirm. An error closes the publishing channel.
    pub(crate) fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<Confirm, TransportError> {
        let message_ttl = match properties.expiration() {
            None => None,
            Some(expiration) => Some(parse_expiration(expiration.as_str())?),
        };
        let mut targets = self.route(exchange, routing_key, properties.headers().as_ref())?;
        let mut nack = false;
        if self.faults_armed.load(Ordering::Relaxed) {
            nack = self.apply_queue_faults(&mut targets);
        }
        if targets.is_empty() {
            return Ok(if nack {
                Confirm::Nack
            } else {
                Confirm::Returned
            });
        }
        let message = Stored {
            seq: 0,
            exchange: exchange.to_owned(),
            routing_key: routing_key.to_owned(),
            properties,
            body: Arc::from(body),
            redelivered: false,
            delivery_count: 0,
            acquired_count: 0,
            expires_at: None,
        };
        let now = Instant::now();
        let mut dead = Vec::new();
        let last = targets.len() - 1;
        let mut message = Some(message);
        for (i, queue) in targets.iter().enumerate() {
            let copy = if i == last {
                message.take()
            } else {
                message.clone()
            };
            if let Some(copy) = copy
                && !queue.enqueue(copy, message_ttl, now, &mut dead)
            {
                nack = true;
            }
        }
        self.dead_letter(dead);
        Ok(if nack { Confirm::Nack } else { Confirm::Ack })
    }

    /// Routes dead letters through their queues' dead-letter exchanges, as
    /// RabbitMQ 3.10 does (at most once): no dead-letter exchange, or one that
    /// does not exist, drops them; a full reject-publish queue drops them; a
    /// queue that would close a cycle with no rejection in it is skipped.
    fn dead_letter(&self, dead: Vec<DeadLetter>) {
        if dead.is_empty() {
            return;
        }
        let mut work: VecDeque<DeadLetter> = dead.into();
        let now = Instant::now();
        let time = self.clock.unix_seconds();
        while let Some(DeadLetter {
            message,
            reason,
            from,
        }) = work.pop_front()
        {
            let Some(dlx) = from.config.dead_letter_exchange.as_deref() else {
                continue;
            };
            let routing_key = from
                .config
                .dead_letter_routing_key
                .clone()
                .unwrap_or_else(|| message.routing_key.clone());
            let headers = death::record(
                &message.properties,
                &DeathEvent {
                    reason,
                    queue: &from.name,
                    exchange: &message.exchange,
                    routing_key: &message.routing_key,
                    time,
                },
            );
            let Ok(mut targets) = self.route(dlx, &routing_key, Some(&headers)) else {
                continue;
            };
            if reason != Reason::Rejected {
                targets.retain(|q| !death::is_cycle(&q.name, Some(&headers)));
            }
            let properties = without_expiration(&message.properties).with_headers(headers);
            let copy = Stored {
                seq: 0,
                exchange: dlx.to_owned(),
                routing_key,
                properties,
                body: message.body,
                redelivered: false,
                delivery_count: 0,
                acquired_count: 0,
                expires_at: None,
            };
            for queue in targets {
                let mut more = Vec::new();
                queue.enqueue(copy.clone(), None, now, &mut more);
                work.extend(more);
            }
        }
    }

    /// Arms a fault: the next `n` publishes routed to `queue` are nacked.
    pub(crate) fn nack_publishes_to(&self, queue: &str, n: u64) {
        self.arm(|f| *f.nack_to.entry(queue.to_owned()).or_default() += n);
    }

    /// Arms a fault: the next `n` publishes routed to `queue` miss it.
    pub(crate) fn return_publishes_to(&self, queue: &str, n: u64) {
        self.arm(|f| *f.return_to.entry(queue.to_owned()).or_default() += n);
    }

    /// Arms a fault: the next `n` publishes fail and close their channel.
    pub(crate) fn fail_next_publishes(&self, n: u64) {
        self.arm(|f| f.fail_publishes += n);
    }

    fn arm(&self, change: impl FnOnce(&mut Faults)) {
        let mut faults = lock(&self.faults);
        change(&mut faults);
        self.faults_armed
            .store(!faults.is_empty(), Ordering::Relaxed);
    }

    /// Whether this publish fails (consuming one armed failure).
    pub(crate) fn take_publish_failure(&self) -> bool {
        if !self.faults_armed.load(Ordering::Relaxed) {
            return false;
        }
        let mut faults = lock(&self.faults);
        if faults.fail_publishes == 0 {
            return false;
        }
        faults.fail_publishes -= 1;
        self.faults_armed
            .store(!faults.is_empty(), Ordering::Relaxed);
        true
    }

    /// Removes the queues a nack or return fault catches; whether one nacks.
    fn apply_queue_faults(&self, targets: &mut Vec<Arc<Queue>>) -> bool {
        let mut faults = lock(&self.faults);
        let mut nack = false;
        targets.retain(|queue| {
            if take_one(&mut faults.nack_to, &queue.name) {
                nack = true;
                false
            } else {
                !take_one(&mut faults.return_to, &queue.name)
            }
        });
        self.faults_armed
            .store(!faults.is_empty(), Ordering::Relaxed);
        nack
    }

    /// Every queue, for snapshots.
    pub(crate) fn queues(&self) -> Vec<Arc<Queue>> {
        read(&self.topology).queues.values().cloned().collect()
    }
}

impl DeadLetterRouter for BrokerShared {
    fn route_dead_letters(&self, dead: Vec<DeadLetter>) {
        self.dead_letter(dead);
    }
}

/// Consumes one armed fault for `queue`; whether there was one.
fn take_one(faults: &mut HashMap<String, u64>, queue: &str) -> bool {
    let Some(left) = faults.get_mut(queue) else {
        return false;
    };
    *left = left.saturating_sub(1);
    if *left == 0 {
        faults.remove(queue);
    }
    true
}

/// `expiration` as RabbitMQ reads it (`rabbit_basic:parse_expiration/1`):
/// a non-negative decimal integer of milliseconds.
fn parse_expiration(expiration: &str) -> Result<Duration, TransportError> {
    let digits = expiration.trim_start_matches(['-', '+']);
    let leading: String = digits.chars().take_while(char::is_ascii_digit).collect();
    if leading.is_empty() {
        return Err(replies::precondition_failed(format_args!(
            "invalid expiration '{expiration}': no_integer"
        )));
    }
    if leading.len() != digits.len() {
        let rest = &digits[leading.len()..];
        return Err(replies::precondition_failed(format_args!(
            "invalid expiration '{expiration}': {{leftover_string,\"{rest}\"}}"
        )));
    }
    if expiration.starts_with('-') {
        return Err(replies::precondition_failed(format_args!(
            "invalid expiration '{expiration}': {{value_negative,-{leading}}}"
        )));
    }
    let ms: u64 = leading.parse().map_err(|_| {
        replies::precondition_failed(format_args!(
            "invalid expiration '{expiration}': {{value_too_large,{leading}}}"
        ))
    })?;
    Ok(Duration::from_millis(ms))
}

/// The same properties without `expiration`: a dead-lettered message loses
/// its per-message TTL (it is kept in `x-death` as `original-expiration`).
fn without_expiration(p: &BasicProperties) -> BasicProperties {
    let mut out = BasicProperties::default();
    if let Some(v) = p.content_type() {
        out = out.with_content_type(v.clone());
    }
    if let Some(v) = p.content_encoding() {
        out = out.with_content_encoding(v.clone());
    }
    if let Some(v) = p.headers() {
        out = out.with_headers(v.clone());
    }
    if let Some(v) = p.delivery_mode() {
        out = out.with_delivery_mode(*v);
    }
    if let Some(v) = p.priority() {
        out = out.with_priority(*v);
    }
    if let Some(v) = p.correlation_id() {
        out = out.with_correlation_id(v.clone());
    }
    if let Some(v) = p.reply_to() {
        out = out.with_reply_to(v.clone());
    }
    if let Some(v) = p.message_id() {
        out = out.with_message_id(v.clone());
    }
    if let Some(v) = p.timestamp() {
        out = out.with_timestamp(*v);
    }
    if let Some(v) = p.kind() {
        out = out.with_type(v.clone());
    }
    if let Some(v) = p.user_id() {
        out = out.with_user_id(v.clone());
    }
    if let Some(v) = p.app_id() {
        out = out.with_app_id(v.clone());
    }
    if let Some(v) = p.cluster_id() {
        out = out.with_cluster_id(v.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiration_is_a_decimal_integer() {
        assert_eq!(parse_expiration("1500"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_expiration("0"), Ok(Duration::ZERO));
        let text = |e: Result<Duration, TransportError>| match e {
            Err(TransportError::Refused { text, .. }) => text,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(
            text(parse_expiration("soon")),
            "PRECONDITION_FAILED - invalid expiration 'soon': no_integer"
        );
        assert_eq!(
            text(parse_expiration("-5")),
            "PRECONDITION_FAILED - invalid expiration '-5': {value_negative,-5}"
        );
    }
}
