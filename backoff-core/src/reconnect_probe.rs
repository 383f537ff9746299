//! [`ReconnectProbe`]: when to probe the nodes' addresses while waiting to
//! reconnect.

use std::time::Duration;

/// How often a node that is down is probed between reconnection attempts.
///
/// A full reconnection (TCP, TLS, the AMQP handshake, authentication) costs
/// the broker work, so its attempts back off ([`ReconnectBackoff`]) up to
/// many seconds. Between them the runtime only opens a TCP connection to each
/// node's address and closes it at once, without a byte of AMQP: to a node
/// that is down that is a refused connect, which costs nothing. When a node
/// that refused starts accepting, the runtime reconnects at once instead of
/// waiting out the backoff ([`ReturnWatch`] decides that).
///
/// The pause between probes is spread over `[interval / 2, interval]` by
/// `jitter`, a number in `[0, 1)` the caller draws at random, so that many
/// instances do not probe in lockstep.
///
/// ```
/// use std::time::Duration;
/// use rabbit_backoff::rules::ReconnectProbe;
///
/// let probe = ReconnectProbe::default();
/// assert_eq!(probe.interval, Duration::from_millis(250));
/// assert_eq!(probe.pause(0.0), Duration::from_millis(125));
/// assert!(probe.pause(0.999) <= Duration::from_millis(250));
/// ```
///
/// [`ReconnectBackoff`]: crate::ReconnectBackoff
/// [`ReturnWatch`]: crate::ReturnWatch
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReconnectProbe {
    /// The longest pause between two probes of the same node.
    pub interval: Duration,
}

/// The shortest interval between probes: a node is never probed more often.
pub const MIN_PROBE_INTERVAL: Duration = Duration::from_millis(10);

impl ReconnectProbe {
    /// Probes at most every `interval` (no less than [`MIN_PROBE_INTERVAL`]).
    pub fn new(interval: Duration) -> Self {
        ReconnectProbe {
            interval: interval.max(MIN_PROBE_INTERVAL),
        }
    }

    /// The pause before the next probe, in `[interval / 2, interval]`.
    pub fn pause(&self, jitter: f64) -> Duration {
        let jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.interval.mul_f64(0.5 + jitter / 2.0)
    }
}

impl Default for ReconnectProbe {
    /// Every 250 ms at most: a returning broker is noticed within a quarter
    /// of a second.
    fn default() -> Self {
        ReconnectProbe::new(Duration::from_millis(250))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pauses_stay_within_the_interval(ms in 0u64..10_000, jitter in 0.0f64..1.0) {
            let probe = ReconnectProbe::new(Duration::from_millis(ms));
            let pause = probe.pause(jitter);
            prop_assert!(pause <= probe.interval);
            prop_assert!(pause >= probe.interval / 2);
            prop_assert!(pause >= MIN_PROBE_INTERVAL / 2);
        }
    }

    #[test]
    fn the_default_probes_four_times_a_second_at_most() {
        let probe = ReconnectProbe::default();
        assert_eq!(probe.pause(0.0), Duration::from_millis(125));
        assert_eq!(probe.pause(1.0), Duration::from_millis(250));
    }

    #[test]
    fn odd_jitter_and_zero_intervals_are_harmless() {
        let probe = ReconnectProbe::default();
        assert_eq!(probe.pause(f64::NAN), Duration::from_millis(125));
        assert_eq!(probe.pause(-3.0), Duration::from_millis(125));
        assert_eq!(probe.pause(7.0), Duration::from_millis(250));
        assert_eq!(
            ReconnectProbe::new(Duration::ZERO).interval,
            MIN_PROBE_INTERVAL
        );
    }
}
