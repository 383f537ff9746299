//! A circuit breaker per consumer: when most recent attempts fail
//! transiently, a dependency is down, and pushing messages through every
//! tier into the dead-letter queue helps nobody. The consumer stops
//! consuming; messages wait in the work queue; after a pause one message
//! probes whether the dependency is back.
//!
//! The rules are here, with time and outcomes passed in; the runtime cancels
//! and restarts the consumer.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::delays::format_ms;
use crate::parse_duration;

/// `breaker = "50% of 20, pause 30s"`: trip when at least 50% of the last
/// 20 handled attempts failed transiently, then pause 30 s before probing.
///
/// ```
/// use std::time::Duration;
/// use rabbit_backoff::BreakerSpec;
///
/// let spec: BreakerSpec = "50% of 20, pause 30s".parse()?;
/// assert_eq!((spec.percent, spec.window, spec.pause), (50, 20, Duration::from_secs(30)));
/// assert_eq!(spec.to_string(), "50% of 20, pause 30s");
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct BreakerSpec {
    /// The share of transient failures that trips it, 1 to 100.
    pub percent: u8,
    /// How many of the most recent attempts it looks at, at least 1.
    pub window: u32,
    /// How long it stays open before a probe.
    pub pause: Duration,
}

const EXAMPLE: &str = "write e.g. \"50% of 20, pause 30s\" (trip when at least 50% of the last 20 attempts failed transiently, probe again after 30s)";

impl FromStr for BreakerSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |what: &str| format!("breaker `{s}`: {what}; {EXAMPLE}");
        let (trip, pause) = s
            .split_once(',')
            .ok_or_else(|| bad("the pause is missing"))?;
        let (percent, window) = trip
            .split_once(" of ")
            .ok_or_else(|| bad("the share of failures is written like `50% of 20`"))?;
        let percent: u8 = percent
            .trim()
            .strip_suffix('%')
            .and_then(|p| p.trim().parse().ok())
            .filter(|p| (1..=100).contains(p))
            .ok_or_else(|| bad("the share is a percentage from 1% to 100%"))?;
        let window: u32 = window
            .trim()
            .parse()
            .ok()
            .filter(|w| *w >= 1)
            .ok_or_else(|| bad("the number of attempts is a whole number, at least 1"))?;
        let pause = pause
            .trim()
            .strip_prefix("pause")
            .filter(|rest| rest.starts_with(char::is_whitespace))
            .ok_or_else(|| bad("the pause is written like `pause 30s`"))?;
        let pause = parse_duration(pause).map_err(|e| bad(&e.to_string()))?;
        Ok(BreakerSpec {
            percent,
            window,
            pause,
        })
    }
}

impl fmt::Display for BreakerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pause = format_ms(u64::try_from(self.pause.as_millis()).unwrap_or(u64::MAX));
        write!(f, "{}% of {}, pause {pause}", self.percent, self.window)
    }
}

crate::serde_str::serde_as_str!(BreakerSpec);

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Consuming.
    Closed,
    /// Paused: not consuming until the pause is over, then one probe.
    Open,
    /// Probing with one message.
    Probing,
}

/// What the runtime must do after an outcome or a probe.
///
/// Exhaustive: only the runtime, pinned to this crate exactly, matches it
/// (services do not see it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerAction {
    /// Nothing changes.
    Continue,
    /// Stop consuming for the pause, then probe.
    Pause(Duration),
    /// The probe succeeded: consume again.
    Resume,
}

/// The state of one consumer's breaker.
///
/// ```
/// use rabbit_backoff_core::{Breaker, BreakerAction, BreakerState};
///
/// let mut breaker = Breaker::new("50% of 4, pause 1s".parse()?);
/// assert_eq!(breaker.record(true), BreakerAction::Continue);
/// assert_eq!(breaker.record(false), BreakerAction::Continue);
/// assert_eq!(breaker.record(false), BreakerAction::Continue);
/// assert!(matches!(breaker.record(true), BreakerAction::Pause(_)), "2 of the last 4 failed");
/// assert_eq!(breaker.state(), BreakerState::Open);
/// breaker.probing();
/// assert_eq!(breaker.probed(true), BreakerAction::Resume);
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone)]
pub struct Breaker {
    spec: BreakerSpec,
    /// Whether each of the most recent attempts failed transiently.
    recent: VecDeque<bool>,
    state: BreakerState,
}

impl Breaker {
    /// A closed breaker with no history.
    pub fn new(spec: BreakerSpec) -> Self {
        Breaker {
            spec,
            recent: VecDeque::with_capacity(spec.window as usize),
            state: BreakerState::Closed,
        }
    }

    /// Where it stands.
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Records one handled attempt while consuming: `failed_transiently`
    /// when its error will be retried. Trips once the window is full and at
    /// least `percent` of it failed transiently. Attempts that finish while
    /// it is open (handlers in flight when it tripped) change nothing.
    pub fn record(&mut self, failed_transiently: bool) -> BreakerAction {
        if self.state != BreakerState::Closed {
            return BreakerAction::Continue;
        }
        if self.recent.len() == self.spec.window as usize {
            self.recent.pop_front();
        }
        self.recent.push_back(failed_transiently);
        let failures = self.recent.iter().filter(|&&f| f).count() as u64;
        let full = self.recent.len() == self.spec.window as usize;
        if full && failures * 100 >= u64::from(self.spec.percent) * u64::from(self.spec.window) {
            self.state = BreakerState::Open;
            BreakerAction::Pause(self.spec.pause)
        } else {
            BreakerAction::Continue
        }
    }

    /// The pause is over: the next message is a probe.
    pub fn probing(&mut self) {
        self.state = BreakerState::Probing;
    }

    /// The probe's outcome: `succeeded` resumes with a fresh history; a
    /// transient failure pauses again. A probe that found no message resumes.
    pub fn probed(&mut self, succeeded: bool) -> BreakerAction {
        if succeeded {
            self.state = BreakerState::Closed;
            self.recent.clear();
            BreakerAction::Resume
        } else {
            self.state = BreakerState::Open;
            BreakerAction::Pause(self.spec.pause)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn refuses_what_it_cannot_read_saying_what_to_write() {
        for (text, says) in [
            ("50% of 20", "pause is missing"),
            ("50 of 20, pause 1s", "percentage"),
            ("150% of 20, pause 1s", "percentage"),
            ("50% of zero, pause 1s", "whole number"),
            ("50%/20, pause 1s", "written like `50% of 20`"),
            ("50% of 20, 1s", "written like `pause 30s`"),
            ("50% of 20, pause 1x", "unknown unit"),
        ] {
            let error = text.parse::<BreakerSpec>().unwrap_err();
            assert!(
                error.contains(says) && error.contains("50% of 20, pause 30s"),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn a_probe_that_fails_pauses_again() {
        let mut breaker = Breaker::new("100% of 1, pause 2s".parse().unwrap());
        assert_eq!(
            breaker.record(true),
            BreakerAction::Pause(Duration::from_secs(2))
        );
        assert_eq!(
            breaker.record(true),
            BreakerAction::Continue,
            "in flight when it tripped"
        );
        breaker.probing();
        assert_eq!(
            breaker.probed(false),
            BreakerAction::Pause(Duration::from_secs(2))
        );
        assert_eq!(breaker.state(), BreakerState::Open);
    }

    proptest! {
        /// It trips exactly when the last `window` attempts hold at least
        /// `percent` transient failures.
        #[test]
        fn trips_on_the_share_of_recent_failures(
            percent in 1u8..=100,
            window in 1u32..30,
            outcomes in proptest::collection::vec(any::<bool>(), 0..200),
        ) {
            let spec = BreakerSpec { percent, window, pause: Duration::from_secs(1) };
            let mut breaker = Breaker::new(spec);
            for (i, &failed) in outcomes.iter().enumerate() {
                let action = breaker.record(failed);
                let seen = &outcomes[..=i];
                let last = &seen[seen.len().saturating_sub(window as usize)..];
                let failures = last.iter().filter(|&&f| f).count() as u64;
                let should = last.len() == window as usize
                    && failures * 100 >= u64::from(percent) * u64::from(window);
                prop_assert_eq!(matches!(action, BreakerAction::Pause(_)), should);
                if should {
                    break;
                }
            }
        }
    }
}
