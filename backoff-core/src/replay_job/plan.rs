//! [`ReplayPlan`]: how a watched replay goes: a canary, then waves, stopped
//! when too many of the replayed messages fail again.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The most messages a canary may hold: a canary is a sample, and a
/// replay of more at once is no longer watched.
pub const MAX_CANARY: u32 = 10_000;

/// How a watched replay goes.
///
/// It first sends `canary` messages of the selection and waits until each
/// has a fate (or `fate_timeout` has passed: a fate not seen by then is
/// unknown). It goes on only if the share of the known fates that failed
/// again is at most `stop_above`. It then sends the rest in waves, and
/// stops as soon as more than `stop_above` of the latest `window` fates
/// are failures.
///
/// ```
/// use rabbit_backoff_core::{ReplayPlan, parse_threshold};
///
/// let plan = ReplayPlan::new(20, parse_threshold("10%")?)?;
/// assert_eq!(plan.canary, 20);
/// assert_eq!(plan.window, 50);
/// assert!(ReplayPlan::new(0, 0.1).is_err());
/// # Ok::<(), rabbit_backoff_core::PlanError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReplayPlan {
    /// How many messages go first.
    pub canary: u32,
    /// The largest share of failures (0 to 1) at which the replay goes on.
    pub stop_above: f64,
    /// How many of the latest fates the waves are judged on.
    pub window: u32,
    /// How long the canary waits for its fates, in milliseconds.
    pub fate_timeout_ms: u64,
}

/// The fates a wave is judged on, at least.
const MIN_WINDOW: u32 = 50;

/// How long a canary waits for its fates, by default.
const FATE_TIMEOUT: Duration = Duration::from_secs(120);

impl ReplayPlan {
    /// A canary of `canary` messages, stopped above a share `stop_above`
    /// of failures (from [`parse_threshold`]); judged on the latest
    /// `max(canary, 50)` fates, a canary waiting up to 120 s for its fates.
    pub fn new(canary: u32, stop_above: f64) -> Result<Self, PlanError> {
        if canary == 0 {
            return Err(PlanError::Canary(canary));
        }
        if canary > MAX_CANARY {
            return Err(PlanError::Canary(canary));
        }
        check_threshold(stop_above)?;
        Ok(ReplayPlan {
            canary,
            stop_above,
            window: canary.max(MIN_WINDOW),
            fate_timeout_ms: FATE_TIMEOUT.as_millis() as u64,
        })
    }

    /// Judges the waves on the latest `window` fates (at least 1).
    pub fn window(mut self, window: u32) -> Result<Self, PlanError> {
        if window == 0 {
            return Err(PlanError::Window);
        }
        self.window = window;
        Ok(self)
    }

    /// Waits up to `timeout` for the canary's fates.
    pub fn fate_timeout(mut self, timeout: Duration) -> Self {
        self.fate_timeout_ms = timeout.as_millis() as u64;
        self
    }

    /// How long the canary waits for its fates.
    pub fn fate_timeout_duration(&self) -> Duration {
        Duration::from_millis(self.fate_timeout_ms)
    }
}

fn check_threshold(share: f64) -> Result<(), PlanError> {
    if share.is_finite() && (0.0..1.0).contains(&share) {
        Ok(())
    } else {
        Err(PlanError::Threshold(format!("{}%", share * 100.0)))
    }
}

/// A threshold as an operator writes it: `10%`, or a share such as `0.1`.
/// It must be at least 0% and below 100% (a replay that stops only when
/// every message fails is no canary).
///
/// ```
/// use rabbit_backoff_core::parse_threshold;
///
/// assert_eq!(parse_threshold("10%")?, 0.1);
/// assert_eq!(parse_threshold("0.25")?, 0.25);
/// assert_eq!(parse_threshold("0%")?, 0.0);
/// let refused = parse_threshold("150%").unwrap_err();
/// assert!(refused.to_string().contains("between 0% and 100%"));
/// # Ok::<(), rabbit_backoff_core::PlanError>(())
/// ```
pub fn parse_threshold(text: &str) -> Result<f64, PlanError> {
    let trimmed = text.trim();
    let share = match trimmed.strip_suffix('%') {
        Some(percent) => percent
            .trim()
            .parse::<f64>()
            .map(|p| p / 100.0)
            .map_err(|_| PlanError::Threshold(text.to_owned()))?,
        None => trimmed
            .parse::<f64>()
            .map_err(|_| PlanError::Threshold(text.to_owned()))?,
    };
    check_threshold(share).map_err(|_| PlanError::Threshold(text.to_owned()))?;
    Ok(share)
}

/// A rate as an operator writes it: a positive number of messages a
/// second, at most a million.
///
/// ```
/// use rabbit_backoff_core::parse_rate;
///
/// assert_eq!(parse_rate("50")?, 50.0);
/// assert_eq!(parse_rate("0.5")?, 0.5);
/// assert!(parse_rate("0").is_err());
/// assert!(parse_rate("-3").is_err());
/// assert!(parse_rate("fast").is_err());
/// # Ok::<(), rabbit_backoff_core::PlanError>(())
/// ```
pub fn parse_rate(text: &str) -> Result<f64, PlanError> {
    let rate = text
        .trim()
        .parse::<f64>()
        .map_err(|_| PlanError::Rate(text.to_owned()))?;
    check_rate(rate).map_err(|_| PlanError::Rate(text.to_owned()))?;
    Ok(rate)
}

/// Checks a rate given as a number (see [`parse_rate`]).
pub(crate) fn check_rate(rate: f64) -> Result<(), PlanError> {
    if rate.is_finite() && rate > 0.0 && rate <= 1_000_000.0 {
        Ok(())
    } else {
        Err(PlanError::Rate(rate.to_string()))
    }
}

/// A plan that makes no sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The canary is empty or too large.
    #[error(
        "a canary of {0} messages: send at least 1 and at most {MAX_CANARY} first (for example --canary 20)"
    )]
    Canary(u32),
    /// The threshold is not a share below 100%.
    #[error(
        "'{0}' is no threshold: write a percentage between 0% and 100% (excluded), such as 10%"
    )]
    Threshold(String),
    /// The rate is not a positive number.
    #[error(
        "'{0}' is no rate: write a positive number of messages a second, at most 1000000, such as 50"
    )]
    Rate(String),
    /// The window is empty.
    #[error("a window of 0 fates judges nothing: give at least 1")]
    Window,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_refuses_what_makes_no_sense() {
        assert_eq!(ReplayPlan::new(0, 0.1), Err(PlanError::Canary(0)));
        assert!(ReplayPlan::new(MAX_CANARY + 1, 0.1).is_err());
        assert!(ReplayPlan::new(5, 1.0).is_err());
        assert!(ReplayPlan::new(5, -0.1).is_err());
        assert!(ReplayPlan::new(5, f64::NAN).is_err());
        assert!(ReplayPlan::new(5, 0.1).unwrap().window(0).is_err());
        for bad in ["", "%", "ten", "100%", "-1%", "1", "NaN", "inf"] {
            assert!(parse_threshold(bad).is_err(), "{bad}");
        }
        for bad in ["", "0", "-1", "NaN", "inf", "2000000"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_window_is_at_least_the_canary() {
        assert_eq!(ReplayPlan::new(200, 0.1).unwrap().window, 200);
        assert_eq!(ReplayPlan::new(3, 0.1).unwrap().window, MIN_WINDOW);
    }
}
