use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The largest delay RabbitMQ accepts as `x-message-ttl`: 2^32 - 1 milliseconds
/// (about 49.7 days).
pub const MAX_DELAY_MS: u64 = u32::MAX as u64;

/// A retry schedule: one delay per retry tier, in the order they are tried.
///
/// Always non-empty, every delay between 1 ms and [`MAX_DELAY_MS`], no delay
/// twice (each delay names its own retry queue).
///
/// ```
/// use std::time::Duration;
/// use backoff_core::Delays;
///
/// let delays: Delays = "500ms, 5s, 1m, 1h".parse()?;
/// assert_eq!(delays.len(), 4);
/// assert_eq!(delays.get(2), Some(Duration::from_secs(60)));
/// assert_eq!(delays.to_string(), "500ms,5s,1m,1h");
/// # Ok::<(), backoff_core::DelayError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Delays {
    millis: Vec<u64>,
}

/// Why a delay list was refused. Each message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
}

impl Delays {
    /// Builds a schedule from milliseconds, validating it.
    ///
    /// ```
    /// let delays = backoff_core::Delays::from_millis(vec![100, 200])?;
    /// assert_eq!(delays.to_string(), "100ms,200ms");
    /// # Ok::<(), backoff_core::DelayError>(())
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
        Ok(Delays { millis })
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

/// Parses one duration written like a delay (`500ms`, `30s`, `2m`, `1h`):
/// more than zero and at most [`MAX_DELAY_MS`].
///
/// ```
/// use std::time::Duration;
/// assert_eq!(backoff_core::parse_duration("30s"), Ok(Duration::from_secs(30)));
/// assert!(backoff_core::parse_duration("0s").is_err());
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
fn format_ms(ms: u64) -> String {
    for (unit, factor) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms != 0 && ms.is_multiple_of(factor) {
            return format!("{}{unit}", ms / factor);
        }
    }
    format!("{ms}ms")
}

impl fmt::Display for Delays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &ms) in self.millis.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&format_ms(ms))?;
        }
        Ok(())
    }
}

impl serde::Serialize for Delays {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Delays {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
