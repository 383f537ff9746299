//! [`Delays`]: the retry schedule, one tier per delay, parsed from
//! `"5s,15s,60s"`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The largest delay RabbitMQ accepts as `x-message-ttl`: 2^32 - 1 milliseconds
/// (about 49.7 days).
pub const MAX_DELAY_MS: u64 = u32::MAX as u64;

/// A retry schedule: one delay per retry tier, in the order they are tried.
///
/// Always non-empty, every delay between 1 ms and [`MAX_DELAY_MS`]. Written
/// as a list (`"5s,15s,60s"`, no delay twice: each names its own retry
/// queue) or as a formula: `"exponential(100ms, x2, 4)"` gives 100ms, 200ms,
/// 400ms, 800ms, and `"exponential(1s, x3, 10, max 5m)"` caps every tier at
/// 5 minutes, so its last tiers share the 5-minute queue.
///
/// ```
/// use std::time::Duration;
/// use rabbit_backoff::Delays;
///
/// let delays: Delays = "500ms, 5s, 1m, 1h".parse()?;
/// assert_eq!(delays.len(), 4);
/// assert_eq!(delays.get(2), Some(Duration::from_secs(60)));
/// assert_eq!(delays.to_string(), "500ms,5s,1m,1h");
/// # Ok::<(), rabbit_backoff::DelayError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Delays {
    millis: Vec<u64>,
    /// How it was written, when not as a list: `exponential(…)`, canonical.
    formula: Option<String>,
}

/// The most tiers an `exponential(…)` schedule may have.
pub const MAX_TIERS: u32 = 100;

/// Why a delay list was refused. Each message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DelayError {
    /// No delay at all.
    #[error("the delay list is empty; write at least one delay, e.g. \"5s,15s,60s\"")]
    Empty,
    /// Two commas in a row, or a trailing comma.
    #[error("delay #{position} is empty; separate delays with single commas, e.g. \"5s,15s,60s\"")]
    EmptyItem {
        /// 1-based position in the list.
        position: usize,
    },
    /// A delay without a unit, such as `5`.
    #[error("delay `{item}` has no unit; write `{item}ms`, `{item}s`, `{item}m` or `{item}h`")]
    MissingUnit {
        /// The delay as written.
        item: String,
    },
    /// A delay with a unit other than ms, s, m, h.
    #[error("delay `{item}` has unknown unit `{unit}`; use ms, s, m or h, e.g. \"5s\"")]
    UnknownUnit {
        /// The delay as written.
        item: String,
        /// The unit as written.
        unit: String,
    },
    /// A delay that does not start with a whole number.
    #[error(
        "delay `{item}` is not a whole number followed by a unit; write e.g. \"500ms\" or \"5s\""
    )]
    NotANumber {
        /// The delay as written.
        item: String,
    },
    /// A delay of zero.
    #[error("delay `{item}` is zero; every delay must be at least 1ms")]
    Zero {
        /// The delay as written.
        item: String,
    },
    /// A delay above RabbitMQ's TTL limit.
    #[error("delay `{item}` is longer than RabbitMQ's TTL limit of 4294967295ms (about 49 days)")]
    TooLong {
        /// The delay as written.
        item: String,
    },
    /// The same delay twice.
    #[error(
        "delay `{item}` appears twice; each delay names its own retry queue, so delays must differ"
    )]
    Duplicate {
        /// The delay as written (second occurrence).
        item: String,
    },
    /// An `exponential(…)` schedule that is not written as expected.
    #[error(
        "`{text}`: {problem}; write e.g. \"exponential(100ms, x2, 4)\" (first delay, factor, number of tiers) or \"exponential(1s, x3, 10, max 5m)\" (each tier capped)"
    )]
    Exponential {
        /// The schedule as written.
        text: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl Delays {
    /// Builds a schedule from milliseconds, validating it.
    ///
    /// ```
    /// let delays = rabbit_backoff::Delays::from_millis(vec![100, 200])?;
    /// assert_eq!(delays.to_string(), "100ms,200ms");
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn from_millis(millis: Vec<u64>) -> Result<Self, DelayError> {
        if millis.is_empty() {
            return Err(DelayError::Empty);
        }
        for (i, &ms) in millis.iter().enumerate() {
            let item = format_ms(ms);
            if ms == 0 {
                return Err(DelayError::Zero { item });
            }
            if ms > MAX_DELAY_MS {
                return Err(DelayError::TooLong { item });
            }
            if millis[..i].contains(&ms) {
                return Err(DelayError::Duplicate { item });
            }
        }
        Ok(Delays {
            millis,
            formula: None,
        })
    }

    /// An exponential schedule: `count` tiers from `first`, each `factor`
    /// times the one before, each capped at `max` when given (so several
    /// tiers may share the capped delay, and its queue).
    ///
    /// ```
    /// use std::time::Duration;
    /// use rabbit_backoff::Delays;
    ///
    /// let d = Delays::exponential(Duration::from_millis(100), 2.0, 4, None)?;
    /// assert_eq!(d.as_millis(), &[100, 200, 400, 800]);
    /// let capped: Delays = "exponential(1s, x3, 10, max 5m)".parse()?;
    /// assert_eq!(capped.as_millis()[..7], [1_000, 3_000, 9_000, 27_000, 81_000, 243_000, 300_000]);
    /// assert_eq!(capped.len(), 10);
    /// assert_eq!(capped.to_string(), "exponential(1s, x3, 10, max 5m)");
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn exponential(
        first: Duration,
        factor: f64,
        count: u32,
        max: Option<Duration>,
    ) -> Result<Self, DelayError> {
        let first_ms = u64::try_from(first.as_millis()).unwrap_or(u64::MAX);
        let max_ms = max.map(|m| u64::try_from(m.as_millis()).unwrap_or(u64::MAX));
        let text = format!(
            "exponential({}, x{factor}, {count}{})",
            format_ms(first_ms),
            max_ms.map_or(String::new(), |m| format!(", max {}", format_ms(m)))
        );
        let problem = |problem: String| DelayError::Exponential {
            text: text.clone(),
            problem,
        };
        if first_ms == 0 {
            return Err(problem("the first delay is zero".into()));
        }
        if !(factor.is_finite() && factor >= 1.0) {
            return Err(problem(format!(
                "the factor x{factor} must be a number of at least 1"
            )));
        }
        if count == 0 || count > MAX_TIERS {
            return Err(problem(format!(
                "{count} tiers: write between 1 and {MAX_TIERS}"
            )));
        }
        if let Some(max_ms) = max_ms
            && (max_ms < first_ms || max_ms > MAX_DELAY_MS)
        {
            return Err(problem(format!(
                "the cap {} must lie between the first delay and RabbitMQ's TTL limit of 4294967295ms",
                format_ms(max_ms)
            )));
        }
        let cap = max_ms.unwrap_or(MAX_DELAY_MS) as f64;
        let mut millis = Vec::with_capacity(count as usize);
        let mut delay = first_ms as f64;
        for tier in 0..count {
            if delay > cap && max_ms.is_none() {
                return Err(problem(format!(
                    "tier {} would wait longer than RabbitMQ's TTL limit of 4294967295ms (about 49 days); add a cap such as `max 1h`",
                    tier + 1
                )));
            }
            millis.push(delay.min(cap).round() as u64);
            delay *= factor;
        }
        // Rounding a small delay times a small factor can repeat a delay
        // below the cap: such a schedule does not grow.
        if let Some(pair) = millis
            .windows(2)
            .find(|w| w[0] == w[1] && Some(w[0]) != max_ms)
        {
            return Err(problem(format!(
                "two tiers round to the same {}: use a larger first delay or factor",
                format_ms(pair[0])
            )));
        }
        Ok(Delays {
            millis,
            formula: Some(text),
        })
    }

    /// The number of retry tiers.
    pub fn len(&self) -> usize {
        self.millis.len()
    }

    /// Always `false`: a schedule has at least one delay.
    pub fn is_empty(&self) -> bool {
        self.millis.is_empty()
    }

    /// The delay of tier `tier` (0-based).
    pub fn get(&self, tier: usize) -> Option<Duration> {
        self.millis.get(tier).map(|&ms| Duration::from_millis(ms))
    }

    /// The delays in milliseconds, tier by tier.
    pub fn as_millis(&self) -> &[u64] {
        &self.millis
    }

    /// The sum of all delays: the least time a message spends waiting before
    /// it is dead-lettered as exhausted.
    pub fn total(&self) -> Duration {
        Duration::from_millis(self.millis.iter().sum())
    }
}

impl FromStr for Delays {
    type Err = DelayError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Err(DelayError::Empty);
        }
        if let Some(args) = s.trim().strip_prefix("exponential") {
            return parse_exponential(s.trim(), args);
        }
        let mut millis = Vec::new();
        for (i, raw) in s.split(',').enumerate() {
            let item = raw.trim();
            if item.is_empty() {
                return Err(DelayError::EmptyItem { position: i + 1 });
            }
            let ms = parse_one(item)?;
            if millis.contains(&ms) {
                return Err(DelayError::Duplicate {
                    item: item.to_owned(),
                });
            }
            millis.push(ms);
        }
        Delays::from_millis(millis)
    }
}

/// `(100ms, x2, 4)` or `(1s, x3, 10, max 5m)`, after `exponential`.
fn parse_exponential(text: &str, args: &str) -> Result<Delays, DelayError> {
    let problem = |problem: &str| DelayError::Exponential {
        text: text.to_owned(),
        problem: problem.to_owned(),
    };
    let inner = args
        .trim()
        .strip_prefix('(')
        .and_then(|a| a.strip_suffix(')'))
        .ok_or_else(|| problem("the arguments go in parentheses"))?;
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    let (first, factor, count, max) = match parts.as_slice() {
        [first, factor, count] => (first, factor, count, None),
        [first, factor, count, max] => (first, factor, count, Some(max)),
        _ => return Err(problem("it takes three or four arguments")),
    };
    let first = parse_one(first)?;
    let factor: f64 = factor
        .strip_prefix('x')
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| problem("the factor is written like x2 or x1.5"))?;
    let count: u32 = count
        .parse()
        .map_err(|_| problem("the number of tiers is a whole number, like 4"))?;
    let max = match max {
        None => None,
        Some(max) => {
            let cap = max
                .strip_prefix("max")
                .filter(|rest| rest.starts_with(char::is_whitespace))
                .ok_or_else(|| problem("the cap is written like `max 5m`"))?;
            Some(parse_one(cap.trim())?)
        }
    };
    Delays::exponential(
        Duration::from_millis(first),
        factor,
        count,
        max.map(Duration::from_millis),
    )
}

/// Parses one duration written like a delay (`500ms`, `30s`, `2m`, `1h`):
/// more than zero and at most [`MAX_DELAY_MS`].
///
/// ```
/// use std::time::Duration;
/// assert_eq!(rabbit_backoff::parse_duration("30s"), Ok(Duration::from_secs(30)));
/// assert!(rabbit_backoff::parse_duration("0s").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, DelayError> {
    let item = s.trim();
    if item.is_empty() {
        return Err(DelayError::Empty);
    }
    parse_one(item).map(Duration::from_millis)
}

fn parse_one(item: &str) -> Result<u64, DelayError> {
    let split = item
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(item.len());
    let (number, unit) = item.split_at(split);
    if number.is_empty() {
        return Err(DelayError::NotANumber {
            item: item.to_owned(),
        });
    }
    let factor: u64 = match unit.trim() {
        "" => {
            return Err(DelayError::MissingUnit {
                item: item.to_owned(),
            });
        }
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other if other.starts_with('.') => {
            return Err(DelayError::NotANumber {
                item: item.to_owned(),
            });
        }
        other => {
            return Err(DelayError::UnknownUnit {
                item: item.to_owned(),
                unit: other.to_owned(),
            });
        }
    };
    // A number too large for u64 is certainly above the TTL limit.
    let value: u64 = number.parse().map_err(|_| DelayError::TooLong {
        item: item.to_owned(),
    })?;
    let ms = value
        .checked_mul(factor)
        .ok_or_else(|| DelayError::TooLong {
            item: item.to_owned(),
        })?;
    if ms == 0 {
        return Err(DelayError::Zero {
            item: item.to_owned(),
        });
    }
    if ms > MAX_DELAY_MS {
        return Err(DelayError::TooLong {
            item: item.to_owned(),
        });
    }
    Ok(ms)
}

/// The shortest exact spelling of a delay: `90s` stays `90s`, `60000ms` is `1m`.
pub(crate) fn format_ms(ms: u64) -> String {
    for (unit, factor) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms != 0 && ms.is_multiple_of(factor) {
            return format!("{}{unit}", ms / factor);
        }
    }
    format!("{ms}ms")
}

impl fmt::Display for Delays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(formula) = &self.formula {
            return f.write_str(formula);
        }
        for (i, &ms) in self.millis.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&format_ms(ms))?;
        }
        Ok(())
    }
}

crate::serde_str::serde_as_str!(Delays);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exponential_schedules_give_tiers_like_lists() {
        let d: Delays = "exponential(100ms, x2, 4)".parse().unwrap();
        assert_eq!(d.as_millis(), &[100, 200, 400, 800]);
        assert_eq!(d.to_string(), "exponential(100ms, x2, 4)");
        let d: Delays = "exponential(1s,x1.5,3)".parse().unwrap();
        assert_eq!(d.as_millis(), &[1_000, 1_500, 2_250]);
        let capped: Delays = "exponential(1s, x3, 10, max 5m)".parse().unwrap();
        assert_eq!(capped.as_millis()[6..], [300_000; 4]);
    }

    #[test]
    fn refuses_bad_exponential_schedules_saying_what_to_write() {
        for (text, says) in [
            ("exponential 100ms, x2, 4", "parentheses"),
            ("exponential(100ms, 2, 4)", "factor is written like x2"),
            ("exponential(100ms, x0.5, 4)", "at least 1"),
            ("exponential(100ms, x2)", "three or four arguments"),
            ("exponential(100ms, x2, four)", "whole number"),
            ("exponential(100ms, x2, 0)", "between 1 and 100"),
            ("exponential(1h, x10, 10)", "add a cap such as `max 1h`"),
            ("exponential(1s, x2, 4, 5m)", "written like `max 5m`"),
            ("exponential(1m, x2, 4, max 1s)", "must lie between"),
            ("exponential(1ms, x1.2, 4)", "round to the same"),
        ] {
            let error = text.parse::<Delays>().unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.contains("exponential(100ms, x2, 4)"), "{error}");
        }
        assert_eq!(
            "exponential(0ms, x2, 4)".parse::<Delays>(),
            Err(DelayError::Zero { item: "0ms".into() })
        );
    }

    proptest! {
        #[test]
        fn exponential_tiers_grow_up_to_the_cap_and_round_trip(
            first in 1u64..10_000,
            factor in 1.0f64..4.0,
            count in 1u32..20,
            cap in proptest::option::of(10_000u64..100_000_000),
        ) {
            let Ok(d) = Delays::exponential(
                Duration::from_millis(first),
                factor,
                count,
                cap.map(Duration::from_millis),
            ) else {
                return Ok(());
            };
            prop_assert_eq!(d.len(), count as usize);
            prop_assert_eq!(d.as_millis()[0], first.min(cap.unwrap_or(u64::MAX)));
            for pair in d.as_millis().windows(2) {
                prop_assert!(pair[0] <= pair[1]);
            }
            if let Some(cap) = cap {
                prop_assert!(d.as_millis().iter().all(|&ms| ms <= cap));
            }
            let again: Delays = d.to_string().parse().unwrap();
            prop_assert_eq!(again.as_millis(), d.as_millis());
        }
    }

    #[test]
    fn parses_every_unit_and_whitespace() {
        let d: Delays = " 250ms, 5s ,2m,1h".parse().unwrap();
        assert_eq!(d.as_millis(), &[250, 5_000, 120_000, 3_600_000]);
        assert_eq!(
            d.total(),
            Duration::from_millis(250 + 5_000 + 120_000 + 3_600_000)
        );
    }

    #[test]
    fn refuses_bad_lists_with_the_right_error() {
        let cases: &[(&str, DelayError)] = &[
            ("", DelayError::Empty),
            ("  ", DelayError::Empty),
            ("5s,,6s", DelayError::EmptyItem { position: 2 }),
            ("5s,", DelayError::EmptyItem { position: 2 }),
            ("5", DelayError::MissingUnit { item: "5".into() }),
            (
                "5x",
                DelayError::UnknownUnit {
                    item: "5x".into(),
                    unit: "x".into(),
                },
            ),
            (
                "5sec",
                DelayError::UnknownUnit {
                    item: "5sec".into(),
                    unit: "sec".into(),
                },
            ),
            ("s", DelayError::NotANumber { item: "s".into() }),
            ("-5s", DelayError::NotANumber { item: "-5s".into() }),
            (
                "1.5s",
                DelayError::NotANumber {
                    item: "1.5s".into(),
                },
            ),
            ("0s", DelayError::Zero { item: "0s".into() }),
            (
                "1194h",
                DelayError::TooLong {
                    item: "1194h".into(),
                },
            ),
            (
                "99999999999999999999999ms",
                DelayError::TooLong {
                    item: "99999999999999999999999ms".into(),
                },
            ),
            (
                "5s,5000ms",
                DelayError::Duplicate {
                    item: "5000ms".into(),
                },
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(
                input.parse::<Delays>().as_ref(),
                Err(expected),
                "input {input:?}"
            );
        }
    }

    #[test]
    fn the_ttl_limit_itself_is_accepted() {
        let d: Delays = "4294967295ms".parse().unwrap();
        assert_eq!(d.as_millis(), &[MAX_DELAY_MS]);
        assert!("4294967296ms".parse::<Delays>().is_err());
    }

    #[test]
    fn error_messages_say_what_to_write() {
        let e = "5".parse::<Delays>().unwrap_err().to_string();
        assert!(e.contains("write `5ms`, `5s`"), "{e}");
    }

    proptest! {
        #[test]
        fn display_round_trips(millis in proptest::collection::btree_set(1..=MAX_DELAY_MS, 1..8)) {
            let d = Delays::from_millis(millis.into_iter().collect()).unwrap();
            let again: Delays = d.to_string().parse().unwrap();
            prop_assert_eq!(again, d);
        }

        #[test]
        fn parsing_never_panics(s in "\\PC{0,40}") {
            let _ = s.parse::<Delays>();
        }
    }
}
