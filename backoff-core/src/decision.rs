//! [`decide`]: what to do with one delivery after its handler ran (ack,
//! retry in a tier, dead-letter), from its [`Outcome`], [`Attempt`] and
//! [`Policy`].

use std::time::Duration;

use crate::{DeadLetterReason, DelayedRetry, Delays, RetryBackend, Verdict};

/// What happened to one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The handler returned `Ok`.
    Success,
    /// The handler returned an error (or panicked or timed out, which are
    /// retried like transient errors).
    Failed {
        /// What the error asks for ([`Classify::verdict`](crate::Classify::verdict)).
        verdict: Verdict,
        /// The error, as it will appear in `x-error`.
        error: String,
    },
    /// The body could not be decoded into the handler's payload type.
    Undecodable {
        /// The decoder's error.
        error: String,
    },
}

/// What the runtime must do with one delivery.
///
/// Not `#[non_exhaustive]`: the runtime that carries out a decision is
/// released with this crate and pinned to it exactly, and its `match` over
/// every variant is what makes a new decision a compile error there rather
/// than a message the runtime does not know what to do with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Acknowledge it: done.
    Ack,
    /// Acknowledge and drop it: the error said the message is obsolete
    /// (`#[discard]`). Nothing goes to the dead-letter queue.
    Discard,
    /// Republish to the retry queue of `delay_ms` with
    /// `x-retry-count = next_count`, then acknowledge the original.
    Retry {
        /// The delay of the retry tier.
        delay_ms: u64,
        /// The count the copy carries.
        next_count: u32,
    },
    /// Give it back to the work queue as a failed delivery
    /// (`basic.reject(requeue = true)`, no copy): with `retry = "delayed"`,
    /// RabbitMQ 4.3 holds it back `delay_ms` and counts it in
    /// `x-delivery-count`.
    Redeliver {
        /// How long the queue holds it back.
        delay_ms: u64,
        /// The delivery count it comes back with.
        next_count: u32,
    },
    /// Settle it as failed with a time to deliver it again (AMQP 1.0
    /// `modified` with `x-opt-delivery-time`, no copy): with
    /// `retry = "scheduled"`, RabbitMQ 4.3 holds it back `delay_ms` from
    /// now.
    Hold {
        /// How long the queue holds it back, before jitter.
        delay_ms: u64,
        /// The count it comes back with.
        next_count: u32,
        /// Whether the wait is one the error asked for
        /// ([`Verdict::RetryAfter`]): held exactly that long, never
        /// jittered shorter.
        exact: bool,
    },
    /// Republish to the dead-letter queue, then acknowledge the original.
    DeadLetter {
        /// Why.
        reason: DeadLetterReason,
    },
}

/// A consumer's retry policy: its ladder and its deadline.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Policy<'a> {
    /// The consumer's own ladder.
    pub delays: &'a Delays,
    /// Dead-letter (reason `expired`) once the first failure is older than
    /// this (`max_age`).
    pub max_age: Option<Duration>,
    /// How a retry waits: a copy to a retry tier, or a rejection the work
    /// queue holds back (`retry = "delayed"`).
    pub backend: RetryBackend,
}

impl<'a> Policy<'a> {
    /// The policy of a ladder without a deadline.
    pub fn new(delays: &'a Delays) -> Self {
        Policy {
            delays,
            max_age: None,
            backend: RetryBackend::Tiers,
        }
    }

    /// The same policy, dead-lettering (reason `expired`) once the first
    /// failure is older than `max_age` (`None`: no deadline).
    ///
    /// ```
    /// use std::time::Duration;
    /// use rabbit_backoff::{Delays, RetryBackend};
    /// use rabbit_backoff::rules::Policy;
    ///
    /// let delays: Delays = "5s,15s".parse()?;
    /// let policy = Policy::new(&delays)
    ///     .with_max_age(Some(Duration::from_secs(3_600)))
    ///     .with_backend(RetryBackend::Tiers);
    /// assert_eq!(policy.max_age, Some(Duration::from_secs(3_600)));
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn with_max_age(mut self, max_age: Option<Duration>) -> Self {
        self.max_age = max_age;
        self
    }

    /// The same policy, waiting between retries by `backend`.
    pub fn with_backend(mut self, backend: RetryBackend) -> Self {
        self.backend = backend;
        self
    }
}

/// Where one delivery stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The retry tiers it has been through (`x-retry-count`).
    pub count: u32,
    /// How long ago it first failed (`x-first-failed-at`), when it has failed
    /// before.
    pub since_first_failure: Option<Duration>,
}

impl Attempt {
    /// A delivery that has been through `count` tiers.
    pub fn count(count: u32) -> Self {
        Attempt {
            count,
            since_first_failure: None,
        }
    }

    /// The same delivery, which first failed `since_first_failure` ago
    /// (`None`: it has not failed before).
    ///
    /// ```
    /// use std::time::Duration;
    /// use rabbit_backoff::rules::Attempt;
    ///
    /// let attempt = Attempt::count(2).with_since_first_failure(Some(Duration::from_secs(90)));
    /// assert_eq!(attempt.since_first_failure, Some(Duration::from_secs(90)));
    /// ```
    pub fn with_since_first_failure(mut self, since_first_failure: Option<Duration>) -> Self {
        self.since_first_failure = since_first_failure;
        self
    }
}

/// Decides what to do with a delivery after its handler ran.
///
/// - Success → ack; an undecodable body → dead letter (`decode`).
/// - [`Verdict::DeadLetter`] → dead letter (`permanent`);
///   [`Verdict::Discard`] → ack and drop.
/// - A retry once the first failure is older than `max_age` → dead letter
///   (`expired`).
/// - [`Verdict::Retry`] → tier `count` of the consumer's ladder,
///   [`Verdict::Ladder`] → tier `count` of the error's own ladder; when the
///   ladder has no such tier → dead letter (`exhausted`).
/// - [`Verdict::RetryAfter`] → the smallest tier of the consumer's ladder at
///   least that long (its longest when none is). It uses up an attempt like
///   any retry, so a dependency that keeps asking to wait cannot keep a
///   message forever: after as many retries as the ladder has tiers, it is
///   exhausted.
/// - With [`RetryBackend::Scheduled`], the same as a [`Decision::Hold`],
///   but a [`Verdict::RetryAfter`] waits exactly as long as it asks
///   (`exact`): the broker holds the message back until any time, not only
///   a tier's.
/// - With [`RetryBackend::Delayed`], a retry is [`Decision::Redeliver`]:
///   the count is the broker's `x-delivery-count`, the wait the work queue's
///   linear ladder, `n × the first delay` capped at the last (what the
///   broker applies, whatever the verdict asked); after as many retries as
///   the consumer's ladder has tiers, it is exhausted.
///
/// ```
/// use std::time::Duration;
/// use rabbit_backoff::Delays;
/// use rabbit_backoff::rules::{decide, Attempt, DeadLetterReason, Decision, Policy, Outcome, Verdict};
///
/// let delays: Delays = "5s,15s".parse()?;
/// let policy = Policy::new(&delays);
/// let transient = Outcome::Failed { verdict: Verdict::Retry, error: "timeout".into() };
/// assert_eq!(
///     decide(policy, Attempt::count(1), &transient),
///     Decision::Retry { delay_ms: 15_000, next_count: 2 }
/// );
/// assert_eq!(
///     decide(policy, Attempt::count(2), &transient),
///     Decision::DeadLetter { reason: DeadLetterReason::Exhausted }
/// );
/// let limited = Outcome::Failed { verdict: Verdict::RetryAfter(Duration::from_secs(7)), error: "429".into() };
/// assert_eq!(decide(policy, Attempt::count(0), &limited), Decision::Retry { delay_ms: 15_000, next_count: 1 });
/// assert_eq!(decide(policy, Attempt::count(2), &Outcome::Success), Decision::Ack);
/// # Ok::<(), rabbit_backoff::DelayError>(())
/// ```
pub fn decide(policy: Policy<'_>, attempt: Attempt, outcome: &Outcome) -> Decision {
    let verdict = match outcome {
        Outcome::Success => return Decision::Ack,
        Outcome::Undecodable { .. } => {
            return Decision::DeadLetter {
                reason: DeadLetterReason::Decode,
            };
        }
        Outcome::Failed { verdict, .. } => *verdict,
    };
    let ladder: &[u64] = match verdict {
        Verdict::DeadLetter => {
            return Decision::DeadLetter {
                reason: DeadLetterReason::Permanent,
            };
        }
        Verdict::Discard => return Decision::Discard,
        Verdict::Retry | Verdict::RetryAfter(_) => policy.delays.as_millis(),
        // The work queue has one ladder; the broker applies only it.
        Verdict::Ladder(_) if policy.backend == RetryBackend::Delayed => policy.delays.as_millis(),
        Verdict::Ladder(ladder) => ladder,
    };
    if let (Some(max_age), Some(age)) = (policy.max_age, attempt.since_first_failure)
        && age > max_age
    {
        return Decision::DeadLetter {
            reason: DeadLetterReason::Expired,
        };
    }
    let tier = attempt.count as usize;
    if tier >= ladder.len() {
        return Decision::DeadLetter {
            reason: DeadLetterReason::Exhausted,
        };
    }
    if policy.backend == RetryBackend::Delayed {
        let next_count = attempt.count.saturating_add(1);
        // The broker's ladder: exactly the consumer's delays when they are
        // linear, which the spec's validation requires.
        let delay_ms = match DelayedRetry::of(policy.delays) {
            Ok(delayed) => delayed.delay_ms(next_count),
            Err(_) => ladder[tier],
        };
        return Decision::Redeliver {
            delay_ms,
            next_count,
        };
    }
    let next_count = attempt.count + 1;
    if policy.backend == RetryBackend::Scheduled {
        return match verdict {
            // The broker holds it back as long as asked, to the millisecond.
            Verdict::RetryAfter(wait) => Decision::Hold {
                delay_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                next_count,
                exact: true,
            },
            _ => Decision::Hold {
                delay_ms: ladder[tier],
                next_count,
                exact: false,
            },
        };
    }
    let delay_ms = match verdict {
        Verdict::RetryAfter(wait) => {
            let wait = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            ladder
                .iter()
                .copied()
                .filter(|&ms| ms >= wait)
                .min()
                .or_else(|| ladder.iter().copied().max())
                .unwrap_or(ladder[tier])
        }
        _ => ladder[tier],
    };
    Decision::Retry {
        delay_ms,
        next_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn failed(verdict: Verdict) -> Outcome {
        Outcome::Failed {
            verdict,
            error: "e".into(),
        }
    }

    #[test]
    fn a_scheduled_retry_after_waits_exactly_as_long_as_asked() {
        let delays: Delays = "5s,15s,60s".parse().unwrap();
        let policy = Policy {
            backend: RetryBackend::Scheduled,
            ..Policy::new(&delays)
        };
        let after = |secs| failed(Verdict::RetryAfter(std::time::Duration::from_secs(secs)));
        for (asked, count, waits) in [(7, 0, 7_000), (120, 1, 120_000), (1, 2, 1_000)] {
            assert_eq!(
                decide(policy, Attempt::count(count), &after(asked)),
                Decision::Hold {
                    delay_ms: waits,
                    next_count: count + 1,
                    exact: true,
                }
            );
        }
        // It uses up an attempt like any retry.
        assert_eq!(
            decide(policy, Attempt::count(3), &after(7)),
            Decision::DeadLetter {
                reason: DeadLetterReason::Exhausted
            }
        );
        // With tiers, the tier at least that long (the longest when none is).
        let tiers = Policy::new(&delays);
        assert_eq!(
            decide(tiers, Attempt::count(1), &after(120)),
            Decision::Retry {
                delay_ms: 60_000,
                next_count: 2
            }
        );
    }

    #[test]
    fn a_message_walks_every_tier_then_dead_letters() {
        let delays: Delays = "5s,15s,60s".parse().unwrap();
        let mut count = 0;
        let mut tiers = Vec::new();
        loop {
            match decide(
                Policy::new(&delays),
                Attempt::count(count),
                &failed(Verdict::Retry),
            ) {
                Decision::Retry {
                    delay_ms,
                    next_count,
                } => {
                    tiers.push(delay_ms);
                    count = next_count;
                }
                Decision::DeadLetter { reason } => {
                    assert_eq!(reason, DeadLetterReason::Exhausted);
                    break;
                }
                other => unreachable!("{other:?}"),
            }
        }
        assert_eq!(tiers, [5_000, 15_000, 60_000]);
        assert_eq!(count, 3, "the dead letter carries the number of tiers");
    }

    #[test]
    fn permanent_discard_and_decode_skip_the_tiers() {
        let delays: Delays = "1s".parse().unwrap();
        let policy = Policy::new(&delays);
        assert_eq!(
            decide(policy, Attempt::count(0), &failed(Verdict::DeadLetter)),
            Decision::DeadLetter {
                reason: DeadLetterReason::Permanent
            }
        );
        assert_eq!(
            decide(policy, Attempt::count(0), &failed(Verdict::Discard)),
            Decision::Discard
        );
        let undecodable = Outcome::Undecodable {
            error: "eof".into(),
        };
        assert_eq!(
            decide(policy, Attempt::count(0), &undecodable),
            Decision::DeadLetter {
                reason: DeadLetterReason::Decode
            }
        );
    }

    #[test]
    fn an_errors_own_ladder_replaces_the_consumers() {
        let delays: Delays = "1s".parse().unwrap();
        const LADDER: &[u64] = &[60_000, 300_000, 1_800_000];
        let policy = Policy::new(&delays);
        let own = failed(Verdict::Ladder(LADDER));
        assert_eq!(
            decide(policy, Attempt::count(2), &own),
            Decision::Retry {
                delay_ms: 1_800_000,
                next_count: 3
            }
        );
        assert_eq!(
            decide(policy, Attempt::count(3), &own),
            Decision::DeadLetter {
                reason: DeadLetterReason::Exhausted
            }
        );
    }

    #[test]
    fn retry_after_takes_the_smallest_tier_that_waits_long_enough() {
        let delays: Delays = "100ms,1s,5s".parse().unwrap();
        let policy = Policy::new(&delays);
        let after = |ms| failed(Verdict::RetryAfter(Duration::from_millis(ms)));
        let delay = |ms, count| match decide(policy, Attempt::count(count), &after(ms)) {
            Decision::Retry { delay_ms, .. } => delay_ms,
            other => panic!("{other:?}"),
        };
        assert_eq!(delay(700, 0), 1_000);
        assert_eq!(delay(50, 0), 100);
        assert_eq!(delay(1_000, 2), 1_000);
        assert_eq!(
            delay(60_000, 0),
            5_000,
            "longer than every tier: the longest"
        );
        assert_eq!(
            decide(policy, Attempt::count(3), &after(700)),
            Decision::DeadLetter {
                reason: DeadLetterReason::Exhausted
            },
            "it uses up attempts like any retry"
        );
    }

    #[test]
    fn a_deadline_dead_letters_retries_as_expired() {
        let delays: Delays = "1s,2s".parse().unwrap();
        let policy = Policy {
            delays: &delays,
            max_age: Some(Duration::from_secs(3_600)),
            backend: RetryBackend::Tiers,
        };
        let old = Attempt {
            count: 1,
            since_first_failure: Some(Duration::from_secs(3_601)),
        };
        let young = Attempt {
            count: 1,
            since_first_failure: Some(Duration::from_secs(10)),
        };
        assert_eq!(
            decide(policy, old, &failed(Verdict::Retry)),
            Decision::DeadLetter {
                reason: DeadLetterReason::Expired
            }
        );
        assert!(matches!(
            decide(policy, young, &failed(Verdict::Retry)),
            Decision::Retry { .. }
        ));
        assert_eq!(
            decide(policy, old, &failed(Verdict::DeadLetter)),
            Decision::DeadLetter {
                reason: DeadLetterReason::Permanent
            },
            "a permanent failure is permanent, however old"
        );
    }

    #[test]
    fn delayed_retries_redeliver_on_the_linear_ladder_then_dead_letter() {
        let delays: Delays = "1s,2s,3s".parse().unwrap();
        let policy = Policy {
            backend: RetryBackend::Delayed,
            ..Policy::new(&delays)
        };
        for (count, delay_ms) in [(0, 1_000), (1, 2_000), (2, 3_000)] {
            for verdict in [
                Verdict::Retry,
                Verdict::RetryAfter(Duration::from_secs(60)),
                Verdict::Ladder(&[60_000]),
            ] {
                assert_eq!(
                    decide(policy, Attempt::count(count), &failed(verdict)),
                    Decision::Redeliver {
                        delay_ms,
                        next_count: count + 1
                    },
                    "{verdict:?} at {count}"
                );
            }
        }
        assert_eq!(
            decide(policy, Attempt::count(3), &failed(Verdict::Retry)),
            Decision::DeadLetter {
                reason: DeadLetterReason::Exhausted
            }
        );
        assert_eq!(
            decide(policy, Attempt::count(0), &failed(Verdict::DeadLetter)),
            Decision::DeadLetter {
                reason: DeadLetterReason::Permanent
            },
            "a permanent failure never waits"
        );
        assert_eq!(
            decide(policy, Attempt::count(0), &Outcome::Success),
            Decision::Ack
        );
    }

    proptest! {
        #[test]
        fn transient_failures_never_skip_or_repeat_a_tier(n in 1usize..10, count in any::<u32>()) {
            let delays = Delays::from_millis((1..=n as u64).collect()).unwrap();
            match decide(Policy::new(&delays), Attempt::count(count), &failed(Verdict::Retry)) {
                Decision::Retry { delay_ms, next_count } => {
                    prop_assert_eq!(delay_ms, count as u64 + 1);
                    prop_assert_eq!(next_count, count + 1);
                    prop_assert!((count as usize) < n);
                }
                Decision::DeadLetter { reason } => {
                    prop_assert_eq!(reason, DeadLetterReason::Exhausted);
                    prop_assert!(count as usize >= n);
                }
                other => prop_assert!(false, "{other:?}"),
            }
        }

        #[test]
        fn retry_after_never_waits_less_than_asked_when_a_tier_can(
            wait in 1u64..100_000,
            count in 0u32..3,
        ) {
            let delays: Delays = "100ms,1s,5s,30s".parse().unwrap();
            let outcome = failed(Verdict::RetryAfter(Duration::from_millis(wait)));
            let Decision::Retry { delay_ms, .. } = decide(Policy::new(&delays), Attempt::count(count), &outcome) else {
                return Err(TestCaseError::fail("a retry"));
            };
            if wait <= 30_000 {
                prop_assert!(delay_ms >= wait);
                prop_assert!(delays.as_millis().iter().all(|&d| d < wait || d >= delay_ms));
            } else {
                prop_assert_eq!(delay_ms, 30_000);
            }
        }
    }
}
