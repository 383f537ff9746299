//! How a consumer waits between retries: retry tiers (TTL queues that
//! dead-letter back), RabbitMQ 4.3's delayed retries of a quorum queue, or
//! RabbitMQ 4.3's retries held back until the time the consumer asks.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Argument, Delays};

/// Names of the quorum queue arguments of RabbitMQ 4.3's delayed retries.
pub mod delayed_arguments {
    /// Which returns are held back: `all`, `failed` or `returned`.
    pub const TYPE: &str = "x-delayed-retry-type";
    /// The delay of the first retry, in milliseconds.
    pub const MIN: &str = "x-delayed-retry-min";
    /// The longest delay, in milliseconds.
    pub const MAX: &str = "x-delayed-retry-max";
    /// The value of [`TYPE`] the framework declares: only failed deliveries
    /// (`basic.reject` with requeue, a channel closed with the message
    /// unsettled) wait; a message given back with `basic.nack` is delivered
    /// again at once and is not counted.
    pub const FAILED: &str = "failed";
    /// The header in which RabbitMQ 4.3 counts the failed deliveries of a
    /// message of a quorum queue: the retry count of the delayed backend.
    pub const DELIVERY_COUNT: &str = "x-delivery-count";
}

/// How a consumer waits between retries (`retry = "tiers"`, `"delayed"` or
/// `"scheduled"`).
///
/// ```
/// use rabbit_backoff::RetryBackend;
///
/// assert_eq!("delayed".parse::<RetryBackend>(), Ok(RetryBackend::Delayed));
/// assert_eq!(RetryBackend::default(), RetryBackend::Tiers);
/// assert!("ttl".parse::<RetryBackend>().unwrap_err().contains("\"tiers\""));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RetryBackend {
    /// One TTL retry queue per delay, dead-lettered back to the work queue;
    /// each retry is a confirmed copy carrying `x-retry-count` (the default;
    /// every broker version).
    #[default]
    Tiers,
    /// RabbitMQ 4.3's delayed retries of a quorum work queue: a transient
    /// failure is `basic.reject(requeue = true)`, no copy; the queue holds
    /// the message back, the n-th retry `min(n × first delay, last delay)`,
    /// and counts it in `x-delivery-count`. A linear ladder only, no
    /// `x-error` per attempt, RabbitMQ 4.3 or later only (a consumer refuses
    /// to start on a broker that would ignore the arguments).
    Delayed,
    /// RabbitMQ 4.3's retries held back until a time the consumer names,
    /// over AMQP 1.0 (the facade's feature `amqp1`): a transient failure
    /// settles the delivery as `modified` with `x-opt-delivery-time` (now
    /// plus the exact delay), `x-opt-retry-count` and `x-opt-error`, and the
    /// quorum work queue delivers it again at that time with those
    /// annotations. No retry queue, no retry copy. A dead letter stays a
    /// confirmed copy with the article's headers (`x-retry-count`,
    /// `x-error`, `x-failed-at`), as with tiers: RabbitMQ keeps only `x-opt-`
    /// annotations on a message it dead-letters itself. The whole schedule:
    /// the exponential forms, the error type's own ladders, `RetryAfter` to
    /// the millisecond, jitter and `max_age`. Quorum queues and RabbitMQ 4.3
    /// or later only (a consumer refuses to start on a broker that would
    /// ignore the delivery time).
    ///
    /// Experimental (docs/rabbitmq-versions.md, "Scheduled retries on 4.3").
    Scheduled,
}

impl RetryBackend {
    /// The attribute value: `tiers`, `delayed` or `scheduled`.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryBackend::Tiers => "tiers",
            RetryBackend::Delayed => "delayed",
            RetryBackend::Scheduled => "scheduled",
        }
    }

    /// The header a delivery's retry count is read from: `x-retry-count`,
    /// which each tier's copy carries; with delayed retries the broker's own
    /// `x-delivery-count`; with scheduled retries the annotation
    /// `x-opt-retry-count` that each `modified` sets.
    ///
    /// ```
    /// use rabbit_backoff::RetryBackend;
    ///
    /// assert_eq!(RetryBackend::Tiers.count_header(), "x-retry-count");
    /// assert_eq!(RetryBackend::Delayed.count_header(), "x-delivery-count");
    /// assert_eq!(RetryBackend::Scheduled.count_header(), "x-opt-retry-count");
    /// ```
    pub fn count_header(self) -> &'static str {
        match self {
            RetryBackend::Tiers => crate::headers::RETRY_COUNT,
            RetryBackend::Delayed => delayed_arguments::DELIVERY_COUNT,
            RetryBackend::Scheduled => crate::annotations::RETRY_COUNT,
        }
    }
}

impl fmt::Display for RetryBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RetryBackend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tiers" => Ok(RetryBackend::Tiers),
            "delayed" => Ok(RetryBackend::Delayed),
            "scheduled" => Ok(RetryBackend::Scheduled),
            other => Err(format!(
                "`{other}` is not a retry backend; write \"tiers\" (a TTL retry queue per delay, the default), \"delayed\" (RabbitMQ 4.3's delayed retries of a quorum work queue, a linear ladder) or \"scheduled\" (RabbitMQ 4.3 holds each retry back until the time the consumer asks, over AMQP 1.0)"
            )),
        }
    }
}

/// The delayed retry of a quorum work queue, as RabbitMQ 4.3 applies it:
/// when a delivery fails (`basic.reject` with requeue), the queue adds one
/// to the message's delivery count `n` and holds it back
/// `min(min_ms × n, max_ms)` before delivering it again (`rabbit_fifo`,
/// `calculate_ready_at`). So the n-th retry waits `min_ms × n`, capped at
/// `max_ms`: a linear ladder.
///
/// ```
/// use rabbit_backoff::Delays;
/// use rabbit_backoff::topology::DelayedRetry;
///
/// let delayed = DelayedRetry::of(&"5s,10s,15s".parse()?)?;
/// assert_eq!((delayed.min_ms, delayed.max_ms), (5_000, 15_000));
/// assert_eq!(delayed.delay_ms(2), 10_000);
/// assert_eq!(delayed.delay_ms(9), 15_000);
/// // A capped ladder is one too.
/// assert!(DelayedRetry::of(&"1s,2s,2500ms".parse()?).is_ok());
/// // An exponential one is not.
/// let refused = DelayedRetry::of(&"5s,15s,60s".parse()?).unwrap_err();
/// assert_eq!(refused.suggestion.to_string(), "5s,10s,15s");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DelayedRetry {
    /// `x-delayed-retry-min`: the first retry's delay, and the step.
    pub min_ms: u64,
    /// `x-delayed-retry-max`: the longest delay.
    pub max_ms: u64,
}

/// A schedule that RabbitMQ 4.3's delayed retries cannot wait.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "delays = \"{delays}\" is not a linear ladder, and RabbitMQ 4.3's delayed retries wait only those: the n-th retry waits n × the first delay, capped at the last delay; write delays = \"{suggestion}\", or keep this schedule with retry = \"tiers\""
)]
#[non_exhaustive]
pub struct NotLinear {
    /// The schedule as given, written canonically.
    pub delays: String,
    /// The linear ladder with the same first delay and as many tiers.
    pub suggestion: String,
}

impl DelayedRetry {
    /// The delayed retry that waits exactly `delays`, when one does: the
    /// ladder `d, 2d, 3d, …` from its first delay `d`, each capped at its
    /// last delay.
    pub fn of(delays: &Delays) -> Result<Self, NotLinear> {
        let millis = delays.as_millis();
        let min_ms = millis[0];
        let max_ms = millis[millis.len() - 1];
        let delayed = DelayedRetry { min_ms, max_ms };
        let linear = max_ms >= min_ms
            && millis
                .iter()
                .enumerate()
                .all(|(i, &ms)| ms == delayed.delay_ms(i as u32 + 1));
        if linear {
            return Ok(delayed);
        }
        let ladder = (1..=millis.len() as u64)
            .map(|n| min_ms.saturating_mul(n).min(crate::MAX_DELAY_MS))
            .collect::<Vec<_>>();
        Err(NotLinear {
            delays: delays.to_string(),
            // Distinct and in range: the ladder grows by min_ms > 0, capped
            // at most once at the longest delay a schedule may have.
            suggestion: Delays::from_millis(ladder)
                .or_else(|_| Delays::from_millis(vec![min_ms]))
                .unwrap_or_else(|_| delays.clone())
                .to_string(),
        })
    }

    /// How long the queue holds a message back after its `delivery_count`-th
    /// failed delivery: `min(min_ms × delivery_count, max_ms)`, a count of 0
    /// read as 1, as RabbitMQ 4.3 does.
    pub fn delay_ms(self, delivery_count: u32) -> u64 {
        self.min_ms
            .saturating_mul(u64::from(delivery_count.max(1)))
            .min(self.max_ms)
    }

    /// The work queue's arguments: `x-delayed-retry-type = failed`,
    /// `x-delayed-retry-min`, `x-delayed-retry-max`.
    ///
    /// ```
    /// use rabbit_backoff::topology::{Argument, DelayedRetry};
    ///
    /// let arguments = DelayedRetry::of(&"1s,2s".parse()?)?.arguments();
    /// assert_eq!(arguments[0], ("x-delayed-retry-type".to_owned(), Argument::Str("failed".into())));
    /// assert_eq!(arguments[2], ("x-delayed-retry-max".to_owned(), Argument::Int(2_000)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn arguments(self) -> [(String, Argument); 3] {
        let int = |ms: u64| Argument::Int(i64::try_from(ms).unwrap_or(i64::MAX));
        [
            (
                delayed_arguments::TYPE.to_owned(),
                Argument::Str(delayed_arguments::FAILED.to_owned()),
            ),
            (delayed_arguments::MIN.to_owned(), int(self.min_ms)),
            (delayed_arguments::MAX.to_owned(), int(self.max_ms)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delays(text: &str) -> Delays {
        text.parse().unwrap()
    }

    #[test]
    fn linear_and_capped_ladders_map_to_min_and_max() {
        for (text, min, max) in [
            ("5s", 5_000, 5_000),
            ("1s,2s,3s,4s", 1_000, 4_000),
            ("100ms,200ms,250ms", 100, 250),
        ] {
            let delayed = DelayedRetry::of(&delays(text)).unwrap();
            assert_eq!((delayed.min_ms, delayed.max_ms), (min, max), "{text}");
            let ladder: Vec<u64> = (1..=delays(text).len() as u32)
                .map(|n| delayed.delay_ms(n))
                .collect();
            assert_eq!(ladder, delays(text).as_millis(), "{text}");
        }
    }

    #[test]
    fn other_schedules_are_refused_with_the_linear_ladder_to_write() {
        for (text, suggestion) in [
            ("5s,15s,60s", "5s,10s,15s"),
            ("1s,3s", "1s,2s"),
            ("2s,1s", "2s,4s"),
            ("1s,2s,5s", "1s,2s,3s"),
            ("exponential(100ms, x2, 4)", "100ms,200ms,300ms,400ms"),
        ] {
            let refused = DelayedRetry::of(&delays(text)).unwrap_err();
            assert_eq!(refused.suggestion.to_string(), suggestion, "{text}");
            let message = refused.to_string();
            assert!(
                message.contains(&format!("delays = \"{suggestion}\""))
                    && message.contains("retry = \"tiers\""),
                "{message}"
            );
        }
    }

    #[test]
    fn the_delay_follows_rabbitmqs_formula() {
        let delayed = DelayedRetry {
            min_ms: 1_000,
            max_ms: 2_500,
        };
        assert_eq!(delayed.delay_ms(0), 1_000, "a count of 0 is read as 1");
        assert_eq!(delayed.delay_ms(1), 1_000);
        assert_eq!(delayed.delay_ms(2), 2_000);
        assert_eq!(delayed.delay_ms(3), 2_500);
        assert_eq!(delayed.delay_ms(u32::MAX), 2_500);
    }

    #[test]
    fn backends_parse_and_print() {
        for backend in [RetryBackend::Tiers, RetryBackend::Delayed] {
            assert_eq!(backend.as_str().parse::<RetryBackend>(), Ok(backend));
            assert_eq!(backend.to_string(), backend.as_str());
        }
        assert!("Delayed".parse::<RetryBackend>().is_err());
    }
}
