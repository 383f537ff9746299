//! A queue's arguments: what the broker acts on (type, TTL, dead-letter
//! exchange, length limit, overflow, delivery limit), validated as RabbitMQ
//! validates them, and compared as RabbitMQ compares a redeclaration.

use std::time::Duration;

use rabbit_backoff_core::arguments as arg;
use rabbit_backoff_core::{Argument, delayed_arguments};
use rabbit_backoff_runtime::transport::TransportError;

use crate::release::Release;
use crate::replies;

/// `classic` or `quorum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueKind {
    Classic,
    Quorum,
}

/// What a full queue (`x-max-length`) does with one more message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Drops (dead-letters, reason `maxlen`) from the head.
    DropHead,
    /// Refuses the new message: the publisher gets a nack.
    RejectPublish,
}

/// A queue's arguments, as the broker acts on them.
#[derive(Debug, Clone)]
pub(crate) struct QueueConfig {
    pub(crate) kind: QueueKind,
    pub(crate) message_ttl: Option<Duration>,
    pub(crate) dead_letter_exchange: Option<String>,
    pub(crate) dead_letter_routing_key: Option<String>,
    pub(crate) max_length: Option<usize>,
    pub(crate) overflow: Overflow,
    /// Quorum queues only.
    pub(crate) delivery_limit: Option<u64>,
    /// 4.3, quorum queues only: holds a delivery settled as `modified` back
    /// until its `x-opt-delivery-time`, and counts only failed deliveries
    /// in `x-delivery-count`.
    pub(crate) holds_back: bool,
    /// 4.3, quorum queues only: `x-delayed-retry-*`.
    pub(crate) delayed_retry: Option<DelayedRetry>,
}

/// A quorum queue's delayed retries (RabbitMQ 4.3): which returns they hold
/// back, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DelayedRetry {
    /// Failed deliveries (`basic.reject` with requeue, `modified` with
    /// `delivery-failed`).
    pub(crate) failed: bool,
    /// Returned deliveries (`basic.nack` with requeue, `released`).
    pub(crate) returned: bool,
    pub(crate) min: Duration,
    pub(crate) max: Duration,
}

impl DelayedRetry {
    /// How long a message waits after its n-th failed delivery:
    /// `min(min × n, max)`, a count of 0 read as 1 (`rabbit_fifo`,
    /// `calculate_ready_at`).
    pub(crate) fn delay(&self, delivery_count: u32) -> Duration {
        self.min.saturating_mul(delivery_count.max(1)).min(self.max)
    }
}

/// The arguments RabbitMQ compares when a queue is declared again, in the
/// order it compares them (`rabbit_amqqueue:declare_args/0`); the first that
/// differs is the one the error names. Other arguments are not compared.
const COMPARED_ARGUMENTS: &[&str] = &[
    "x-expires",
    arg::MESSAGE_TTL,
    arg::DEAD_LETTER_EXCHANGE,
    arg::DEAD_LETTER_ROUTING_KEY,
    arg::DEAD_LETTER_STRATEGY,
    "x-max-length",
    "x-max-length-bytes",
    "x-max-in-memory-length",
    "x-max-in-memory-bytes",
    "x-max-priority",
    arg::OVERFLOW,
    "x-queue-mode",
    "x-queue-version",
    "x-single-active-consumer",
    arg::QUEUE_TYPE,
    "x-quorum-initial-group-size",
    "x-max-age",
    "x-stream-max-segment-size-bytes",
    "x-initial-cluster-size",
    "x-queue-leader-locator",
    arg::DELIVERY_LIMIT,
];

impl QueueConfig {
    /// Reads and validates a declaration's arguments, refusing what RabbitMQ
    /// refuses (`PRECONDITION_FAILED - invalid arg …`).
    pub(crate) fn parse(
        queue: &str,
        arguments: &[(String, Argument)],
        release: Release,
    ) -> Result<Self, TransportError> {
        let find = |key: &str| arguments.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let non_negative = |key: &str| -> Result<Option<u64>, TransportError> {
            match find(key) {
                None => Ok(None),
                Some(Argument::Int(n)) if *n >= 0 => Ok(Some(*n as u64)),
                Some(Argument::Int(n)) => Err(replies::invalid_argument(
                    queue,
                    key,
                    &format!("{{value_negative,{n}}}"),
                )),
                Some(Argument::Str(_)) => Err(replies::invalid_argument(
                    queue,
                    key,
                    "{unacceptable_type,longstr}",
                )),
                // A value type the in-memory broker does not model.
                Some(_) => Err(replies::invalid_argument(queue, key, "{unacceptable_type}")),
            }
        };
        let string = |key: &str| -> Result<Option<String>, TransportError> {
            match find(key) {
                None => Ok(None),
                Some(Argument::Str(s)) => Ok(Some(s.clone())),
                Some(Argument::Int(_)) => Err(replies::invalid_argument(
                    queue,
                    key,
                    "{unacceptable_type,long}",
                )),
                // A value type the in-memory broker does not model.
                Some(_) => Err(replies::invalid_argument(queue, key, "{unacceptable_type}")),
            }
        };

        let kind = match string(arg::QUEUE_TYPE)?.as_deref() {
            None | Some("classic") => QueueKind::Classic,
            Some("quorum") => QueueKind::Quorum,
            Some("stream") => {
                return Err(TransportError::Other(
                    "the in-memory broker has no stream queues".into(),
                ));
            }
            Some(other) => {
                return Err(replies::invalid_argument(
                    queue,
                    arg::QUEUE_TYPE,
                    &format!("{{unsupported_queue_type,<<\"{other}\">>}}"),
                ));
            }
        };
        let message_ttl = non_negative(arg::MESSAGE_TTL)?.map(Duration::from_millis);
        let dead_letter_exchange = string(arg::DEAD_LETTER_EXCHANGE)?;
        let dead_letter_routing_key = string(arg::DEAD_LETTER_ROUTING_KEY)?;
        if dead_letter_routing_key.is_some() && dead_letter_exchange.is_none() {
            return Err(replies::invalid_argument(
                queue,
                arg::DEAD_LETTER_ROUTING_KEY,
                "routing_key_but_no_dlx_defined",
            ));
        }
        let max_length = non_negative("x-max-length")?.map(|n| n as usize);
        let overflow = match string(arg::OVERFLOW)?.as_deref() {
            None | Some("drop-head") => Overflow::DropHead,
            // reject-publish-dlx also dead-letters the refused message in a
            // classic queue; the in-memory broker only refuses it.
            Some("reject-publish") | Some("reject-publish-dlx") => Overflow::RejectPublish,
            Some(other) => {
                return Err(replies::invalid_argument(
                    queue,
                    arg::OVERFLOW,
                    &format!("{{invalid_overflow,<<\"{other}\">>}}"),
                ));
            }
        };
        let delivery_limit = match kind {
            QueueKind::Quorum => non_negative(arg::DELIVERY_LIMIT)?,
            QueueKind::Classic => None,
        };
        let holds_back = release.holds_back() && kind == QueueKind::Quorum;
        let delayed_retry = match (release.holds_back(), kind) {
            // 3.10 takes them as any unknown `x-` argument, and ignores them.
            (false, _) => None,
            (true, QueueKind::Classic) => {
                match [
                    delayed_arguments::MIN,
                    delayed_arguments::MAX,
                    delayed_arguments::TYPE,
                ]
                .into_iter()
                .find(|key| find(key).is_some())
                {
                    // 4.3 knows them as a quorum queue's.
                    Some(key) => {
                        return Err(replies::precondition_failed(format_args!(
                            "invalid arg '{key}' for queue '{queue}' in vhost '/' of queue type rabbit_classic_queue"
                        )));
                    }
                    None => None,
                }
            }
            (true, QueueKind::Quorum) => {
                let (failed, returned) = match string(delayed_arguments::TYPE)?.as_deref() {
                    None | Some("disabled") => (false, false),
                    Some("failed") => (true, false),
                    Some("returned") => (false, true),
                    Some("all") => (true, true),
                    Some(other) => {
                        return Err(replies::invalid_argument(
                            queue,
                            delayed_arguments::TYPE,
                            &format!("{{invalid_delayed_retry_type,<<\"{other}\">>}}"),
                        ));
                    }
                };
                // The framework always sets both; a missing min is read as
                // 0 here, and a missing max as no cap.
                let min = non_negative(delayed_arguments::MIN)?.unwrap_or(0);
                let max = non_negative(delayed_arguments::MAX)?.unwrap_or(u64::MAX);
                (failed || returned).then(|| DelayedRetry {
                    failed,
                    returned,
                    min: Duration::from_millis(min),
                    max: Duration::from_millis(max.max(min)),
                })
            }
        };
        Ok(QueueConfig {
            kind,
            message_ttl,
            dead_letter_exchange,
            dead_letter_routing_key,
            max_length,
            overflow,
            delivery_limit,
            holds_back,
            delayed_retry,
        })
    }
}

/// Compares a redeclaration with the arguments a queue was declared with,
/// as `rabbit_misc:assert_args_equivalence/4` does.
pub(crate) fn assert_equivalent(
    queue: &str,
    current: &[(String, Argument)],
    received: &[(String, Argument)],
) -> Result<(), TransportError> {
    let find = |list: &'_ [(String, Argument)], key: &str| {
        list.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    };
    for key in COMPARED_ARGUMENTS {
        let (c, r) = (find(current, key), find(received, key));
        if c == r {
            continue;
        }
        // A classic queue may be declared with or without x-queue-type.
        let classic = Some(Argument::Str("classic".into()));
        if *key == arg::QUEUE_TYPE && (c.is_none() && r == classic || c == classic && r.is_none()) {
            continue;
        }
        return Err(replies::inequivalent_argument(
            queue,
            key,
            r.as_ref(),
            c.as_ref(),
        ));
    }
    Ok(())
}
