//! [`ReconnectBackoff`]: how long the runtime waits between reconnection
//! attempts.

use std::time::Duration;

/// Capped exponential backoff with jitter, for reconnecting to the broker.
///
/// Attempt 0 waits about `initial`, each further attempt twice as long, never
/// more than `max`; the wait is spread over its upper half by `jitter`, a
/// number in `[0, 1)` the caller draws at random, so that many services
/// restarting together do not reconnect in lockstep.
///
/// ```
/// use std::time::Duration;
/// use rabbit_backoff::rules::ReconnectBackoff;
///
/// let backoff = ReconnectBackoff::new(Duration::from_millis(100), Duration::from_secs(30));
/// assert_eq!(backoff.delay(0, 0.0), Duration::from_millis(50));
/// assert_eq!(backoff.delay(3, 0.999_999), Duration::from_millis(800) - Duration::from_nanos(400));
/// assert!(backoff.delay(40, 0.5) <= Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReconnectBackoff {
    /// The wait before the first retry.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl ReconnectBackoff {
    /// A backoff from `initial` up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        ReconnectBackoff {
            initial,
            max: max.max(initial),
        }
    }

    /// The wait before retry number `attempt` (0-based).
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(31));
        let ceiling = self.initial.saturating_mul(factor).min(self.max);
        let jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        ceiling.mul_f64(0.5 + jitter / 2.0)
    }
}

impl Default for ReconnectBackoff {
    /// From 100 ms up to 30 s.
    fn default() -> Self {
        ReconnectBackoff::new(Duration::from_millis(100), Duration::from_secs(30))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn bounded_and_growing(attempt in 0u32..100, jitter in 0.0f64..1.0) {
            let b = ReconnectBackoff::default();
            let d = b.delay(attempt, jitter);
            prop_assert!(d <= b.max);
            prop_assert!(d >= b.initial / 2);
            prop_assert!(b.delay(attempt + 1, 0.0) >= b.delay(attempt, 0.0));
        }
    }

    #[test]
    fn odd_jitter_is_harmless() {
        let b = ReconnectBackoff::default();
        assert_eq!(b.delay(0, f64::NAN), Duration::from_millis(50));
        assert_eq!(b.delay(0, 7.0), Duration::from_millis(100));
    }
}
