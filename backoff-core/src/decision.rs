use crate::{DeadLetterReason, Delays, ErrorClass};

/// What happened to one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The handler returned `Ok`.
    Success,
    /// The handler returned an error (or panicked, which counts as transient).
    Failed {
        /// Whether retrying can help.
        class: ErrorClass,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Acknowledge it: done.
    Ack,
    /// Republish to the retry queue of `tier` with `x-retry-count = next_count`,
    /// then acknowledge the original.
    Retry {
        /// The 0-based retry tier, an index into the delays.
        tier: usize,
        /// The count the copy carries.
        next_count: u32,
    },
    /// Republish to the dead-letter queue, then acknowledge the original.
    DeadLetter {
        /// Why.
        reason: DeadLetterReason,
    },
}

/// Decides what to do with a delivery that has been through `count` retry tiers.
///
/// A transient failure goes to tier `count` while tiers remain; a permanent one,
/// an exhausted one and an undecodable body go to the dead-letter queue.
///
/// ```
/// use backoff_core::{decide, DeadLetterReason, Decision, Delays, ErrorClass, Outcome};
///
/// let delays: Delays = "5s,15s".parse()?;
/// let transient = Outcome::Failed { class: ErrorClass::Transient, error: "timeout".into() };
/// assert_eq!(decide(&delays, 1, &transient), Decision::Retry { tier: 1, next_count: 2 });
/// assert_eq!(
///     decide(&delays, 2, &transient),
///     Decision::DeadLetter { reason: DeadLetterReason::Exhausted }
/// );
/// assert_eq!(decide(&delays, 2, &Outcome::Success), Decision::Ack);
/// # Ok::<(), backoff_core::DelayError>(())
/// ```
pub fn decide(delays: &Delays, count: u32, outcome: &Outcome) -> Decision {
    match outcome {
        Outcome::Success => Decision::Ack,
        Outcome::Undecodable { .. } => Decision::DeadLetter {
            reason: DeadLetterReason::Decode,
        },
        Outcome::Failed {
            class: ErrorClass::Permanent,
            ..
        } => Decision::DeadLetter {
            reason: DeadLetterReason::Permanent,
        },
        Outcome::Failed {
            class: ErrorClass::Transient,
            ..
        } => {
            let tier = count as usize;
            if tier < delays.len() {
                Decision::Retry {
                    tier,
                    next_count: count + 1,
                }
            } else {
                Decision::DeadLetter {
                    reason: DeadLetterReason::Exhausted,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn transient() -> Outcome {
        Outcome::Failed {
            class: ErrorClass::Transient,
            error: "e".into(),
        }
    }

    #[test]
    fn a_message_walks_every_tier_then_dead_letters() {
        let delays: Delays = "5s,15s,60s".parse().unwrap();
        let mut count = 0;
        let mut tiers = Vec::new();
        loop {
            match decide(&delays, count, &transient()) {
                Decision::Retry { tier, next_count } => {
                    tiers.push(tier);
                    count = next_count;
                }
                Decision::DeadLetter { reason } => {
                    assert_eq!(reason, DeadLetterReason::Exhausted);
                    break;
                }
                Decision::Ack => unreachable!(),
            }
        }
        assert_eq!(tiers, [0, 1, 2]);
        assert_eq!(count, 3, "the dead letter carries the number of tiers");
    }

    #[test]
    fn permanent_and_decode_skip_the_tiers() {
        let delays: Delays = "1s".parse().unwrap();
        let permanent = Outcome::Failed {
            class: ErrorClass::Permanent,
            error: "bad".into(),
        };
        assert_eq!(
            decide(&delays, 0, &permanent),
            Decision::DeadLetter {
                reason: DeadLetterReason::Permanent
            }
        );
        let undecodable = Outcome::Undecodable {
            error: "eof".into(),
        };
        assert_eq!(
            decide(&delays, 0, &undecodable),
            Decision::DeadLetter {
                reason: DeadLetterReason::Decode
            }
        );
    }

    proptest! {
        #[test]
        fn transient_failures_never_skip_or_repeat_a_tier(n in 1usize..10, count in any::<u32>()) {
            let delays = Delays::from_millis((1..=n as u64).collect()).unwrap();
            match decide(&delays, count, &transient()) {
                Decision::Retry { tier, next_count } => {
                    prop_assert_eq!(tier, count as usize);
                    prop_assert_eq!(next_count, count + 1);
                    prop_assert!(tier < n);
                }
                Decision::DeadLetter { reason } => {
                    prop_assert_eq!(reason, DeadLetterReason::Exhausted);
                    prop_assert!(count as usize >= n);
                }
                Decision::Ack => prop_assert!(false),
            }
        }
    }
}
