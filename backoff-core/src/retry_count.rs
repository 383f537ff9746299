//! [`read_retry_count`]: the tolerant reading of a delivery's
//! `x-retry-count` header.

use crate::HeaderValue;

/// The retry count of a delivery, as read from `x-retry-count`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RetryCount {
    /// The count to act on: how many retry tiers the message has been through.
    pub count: u32,
    /// Set when the header was present but unusable (and `count` fell back to 0
    /// or was capped); the runtime logs it.
    pub warning: Option<RetryCountWarning>,
}

/// Why an `x-retry-count` header was not taken as it stood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RetryCountWarning {
    /// A negative number: read as 0.
    #[error("x-retry-count is negative ({0}); treating it as 0")]
    Negative(i128),
    /// A number above `u32::MAX`: capped, so the message counts as exhausted.
    #[error("x-retry-count {0} is out of range; treating it as {max}", max = u32::MAX)]
    TooLarge(i128),
    /// A string that is not a decimal integer: read as 0.
    #[error("x-retry-count is the string {0:?}, not a decimal integer; treating it as 0")]
    Unparsable(String),
    /// A value of another type: read as 0.
    #[error("x-retry-count is a {0}, not an integer; treating it as 0")]
    WrongType(&'static str),
}

/// Reads `x-retry-count`: any integer width or a decimal string; absent → 0;
/// negative, unparsable or of another type → 0 with a warning; never panics.
///
/// ```
/// use rabbit_backoff::rules::{read_retry_count, HeaderValue};
///
/// assert_eq!(read_retry_count(None).count, 0);
/// assert_eq!(read_retry_count(Some(&HeaderValue::Int(2))).count, 2);
/// assert_eq!(read_retry_count(Some(&HeaderValue::Str(" 3 "))).count, 3);
/// let odd = read_retry_count(Some(&HeaderValue::Str("three")));
/// assert_eq!(odd.count, 0);
/// assert!(odd.warning.is_some());
/// ```
pub fn read_retry_count(value: Option<&HeaderValue<'_>>) -> RetryCount {
    let from_int = |n: i128| {
        if n < 0 {
            RetryCount {
                count: 0,
                warning: Some(RetryCountWarning::Negative(n)),
            }
        } else if n > i128::from(u32::MAX) {
            RetryCount {
                count: u32::MAX,
                warning: Some(RetryCountWarning::TooLarge(n)),
            }
        } else {
            RetryCount {
                count: n as u32,
                warning: None,
            }
        }
    };
    match value {
        None => RetryCount {
            count: 0,
            warning: None,
        },
        Some(HeaderValue::Int(n)) => from_int(*n),
        Some(HeaderValue::Str(s)) => match s.trim().parse::<i128>() {
            Ok(n) => from_int(n),
            Err(_) => RetryCount {
                count: 0,
                warning: Some(RetryCountWarning::Unparsable(truncate_for_log(s))),
            },
        },
        Some(other) => RetryCount {
            count: 0,
            warning: Some(RetryCountWarning::WrongType(other.type_name())),
        },
    }
}

fn truncate_for_log(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_shape_of_header() {
        let r = |v: HeaderValue<'_>| read_retry_count(Some(&v));
        assert_eq!(r(HeaderValue::Int(0)).count, 0);
        assert_eq!(
            r(HeaderValue::Int(7)),
            RetryCount {
                count: 7,
                warning: None
            }
        );
        assert_eq!(
            r(HeaderValue::Int(-1)).warning,
            Some(RetryCountWarning::Negative(-1))
        );
        assert_eq!(r(HeaderValue::Int(-1)).count, 0);
        let big = r(HeaderValue::Int(i64::MAX.into()));
        assert_eq!(big.count, u32::MAX);
        assert!(matches!(big.warning, Some(RetryCountWarning::TooLarge(_))));
        assert_eq!(r(HeaderValue::Str("12")).count, 12);
        assert_eq!(r(HeaderValue::Str("-4")).count, 0);
        assert_eq!(
            r(HeaderValue::Str("1.5")).warning,
            Some(RetryCountWarning::Unparsable("1.5".into()))
        );
        assert_eq!(
            r(HeaderValue::Float(2.0)).warning,
            Some(RetryCountWarning::WrongType("float"))
        );
        assert_eq!(r(HeaderValue::Other("array")).count, 0);
        assert_eq!(
            r(HeaderValue::Bytes(&[0xff])).warning,
            Some(RetryCountWarning::WrongType("bytes"))
        );
    }

    proptest! {
        #[test]
        fn any_integer_reads_without_panicking(n in any::<i64>()) {
            let r = read_retry_count(Some(&HeaderValue::Int(n.into())));
            prop_assert_eq!(r.warning.is_none(), (0..=i64::from(u32::MAX)).contains(&n));
        }

        #[test]
        fn any_string_reads_without_panicking(s in "\\PC{0,80}") {
            let r = read_retry_count(Some(&HeaderValue::Str(&s)));
            if r.warning.is_none() {
                prop_assert_eq!(u64::from(r.count), s.trim().parse::<u64>().unwrap());
            }
        }
    }
}
