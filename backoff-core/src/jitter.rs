//! Jitter that keeps one queue per delay.
//!
//! RabbitMQ expires messages only at the head of a queue, so a per-message
//! TTL cannot spread retries out. Instead each tier gets a small fixed set of
//! sub-queues whose delays are spread evenly over ±`percent` of the tier's
//! delay, each named after its own milliseconds like every retry queue; each
//! retry picks one at random. A burst of failures then comes back as
//! [`SUB_QUEUES`] smaller waves instead of one.

use std::fmt;
use std::str::FromStr;

/// How many sub-queues a jittered tier has: enough to break a burst into
/// five waves, few enough to keep the queue count small (five per tier), and
/// odd, so that the tier's own delay is one of them.
pub const SUB_QUEUES: usize = 5;

/// The largest jitter: ±90% keeps every sub-delay above zero.
pub const MAX_JITTER_PERCENT: u8 = 90;

/// A jitter of ±`percent` around each tier's delay (`jitter = "20%"`).
///
/// ```
/// use rabbit_backoff::Jitter;
///
/// let jitter: Jitter = "20%".parse()?;
/// assert_eq!(jitter.spread(800), vec![640, 720, 800, 880, 960]);
/// // Each retry takes one of them, uniformly.
/// assert_eq!(jitter.pick(800, 0.0), 640);
/// assert_eq!(jitter.pick(800, 0.99), 960);
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Jitter {
    percent: u8,
}

impl Jitter {
    /// A jitter of ±`percent`, between 1 and [`MAX_JITTER_PERCENT`].
    pub fn new(percent: u8) -> Result<Self, String> {
        if (1..=MAX_JITTER_PERCENT).contains(&percent) {
            Ok(Jitter { percent })
        } else {
            Err(format!(
                "a jitter of {percent}% is out of range; write between 1% and {MAX_JITTER_PERCENT}%, e.g. \"20%\""
            ))
        }
    }

    /// The spread, in percent of each delay.
    pub fn percent(self) -> u8 {
        self.percent
    }

    /// The sub-delays of a tier of `delay_ms`: [`SUB_QUEUES`] delays evenly
    /// spread over ±`percent`, ascending, without repeats (a very short delay
    /// may round to fewer), never below 1 ms.
    pub fn spread(self, delay_ms: u64) -> Vec<u64> {
        let half = (SUB_QUEUES / 2) as f64;
        let mut delays: Vec<u64> = (0..SUB_QUEUES)
            .map(|i| {
                let offset = (i as f64 - half) / half * f64::from(self.percent) / 100.0;
                ((delay_ms as f64 * (1.0 + offset)).round() as u64).max(1)
            })
            .collect();
        delays.dedup();
        delays
    }

    /// The sub-delay a retry of a tier of `delay_ms` takes, for a uniform
    /// random `u` in `[0, 1)`.
    pub fn pick(self, delay_ms: u64, u: f64) -> u64 {
        let choices = self.spread(delay_ms);
        let index = ((u.clamp(0.0, 1.0) * choices.len() as f64) as usize).min(choices.len() - 1);
        choices[index]
    }
}

impl FromStr for Jitter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number = s
            .trim()
            .strip_suffix('%')
            .ok_or_else(|| format!("jitter `{s}` is a percentage; write e.g. \"20%\""))?;
        let percent: u8 = number
            .trim()
            .parse()
            .map_err(|_| format!("jitter `{s}` is not a whole percentage; write e.g. \"20%\""))?;
        Jitter::new(percent)
    }
}

impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.percent)
    }
}

crate::serde_str::serde_as_str!(Jitter);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn refuses_what_is_not_a_percentage_in_range() {
        for (text, says) in [
            ("20", "is a percentage"),
            ("x%", "whole percentage"),
            ("0%", "out of range"),
            ("95%", "out of range"),
        ] {
            let error = text.parse::<Jitter>().unwrap_err();
            assert!(
                error.contains(says) && error.contains("\"20%\""),
                "{text}: {error}"
            );
        }
        assert_eq!("5 %".parse::<Jitter>().unwrap().to_string(), "5%");
    }

    proptest! {
        #[test]
        fn the_spread_stays_within_the_jitter_around_the_delay(
            delay in 1u64..10_000_000,
            percent in 1u8..=MAX_JITTER_PERCENT,
        ) {
            let jitter = Jitter::new(percent).unwrap();
            let spread = jitter.spread(delay);
            prop_assert!(!spread.is_empty() && spread.len() <= SUB_QUEUES);
            prop_assert!(spread.windows(2).all(|w| w[0] < w[1]));
            let margin = delay as f64 * f64::from(percent) / 100.0 + 1.0;
            for &d in &spread {
                prop_assert!(d >= 1);
                prop_assert!((d as f64 - delay as f64).abs() <= margin);
            }
            if delay >= 100 {
                prop_assert_eq!(spread.len(), SUB_QUEUES);
                prop_assert!(spread.contains(&delay), "the tier's own delay is one of them");
            }
        }

        /// Over 10 000 uniform draws each sub-queue is chosen within ±5% of
        /// its fair share: the draws are spread evenly over `[0, 1)` from an
        /// arbitrary offset, so this checks the choice itself, not a random
        /// generator's luck.
        #[test]
        fn the_choice_is_uniform(
            offset in 0.0f64..1.0,
            delay in 100u64..10_000_000,
            percent in 1u8..=MAX_JITTER_PERCENT,
        ) {
            let jitter = Jitter::new(percent).unwrap();
            let spread = jitter.spread(delay);
            let mut counts = vec![0u32; spread.len()];
            for i in 0..10_000 {
                let u = (offset + f64::from(i) / 10_000.0).fract();
                let picked = jitter.pick(delay, u);
                counts[spread.iter().position(|&d| d == picked).unwrap()] += 1;
            }
            let fair = 10_000.0 / spread.len() as f64;
            for count in counts {
                prop_assert!((f64::from(count) - fair).abs() <= fair * 0.05, "{count} of {fair}");
            }
        }
    }
}
