//! Reading `x-failed-at`, whoever wrote it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Reads an RFC 3339 instant, as found in `x-failed-at`: the framework's own
/// (`2026-12-02T10:40:07.121Z`), a hand-written consumer's, such as
/// JavaScript's `new Date().toISOString()` (the same shape), or any other
/// RFC 3339 time with or without fractional seconds and with a `Z` or a
/// `±hh:mm` offset. A time without an offset (Python's `utcnow().isoformat()`)
/// is read as UTC. `None` for anything else, and for instants before 1970.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use rabbit_backoff::rules::parse_failed_at;
///
/// let js = parse_failed_at("2026-12-02T10:40:07.121Z");
/// assert_eq!(js, Some(UNIX_EPOCH + Duration::from_millis(1_796_208_007_121)));
/// assert_eq!(parse_failed_at("2026-12-02T11:40:07.121+01:00"), js);
/// assert_eq!(parse_failed_at("yesterday"), None);
/// ```
pub fn parse_failed_at(text: &str) -> Option<SystemTime> {
    let t = text.trim();
    let b = t.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let year = digits(t, 0, 4)?;
    let month = digits(t, 5, 7)?;
    let day = digits(t, 8, 10)?;
    let hour = digits(t, 11, 13)?;
    let minute = digits(t, 14, 16)?;
    let second = digits(t, 17, 19)?;
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }

    let mut rest = &t[19..];
    let mut nanos: u64 = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let len = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 {
            return None;
        }
        for (i, digit) in fraction
            .bytes()
            .take(9)
            .take_while(u8::is_ascii_digit)
            .enumerate()
        {
            nanos += u64::from(digit - b'0') * 10u64.pow(8 - i as u32);
        }
        rest = &fraction[len..];
    }
    let offset_seconds: i64 = match rest.as_bytes() {
        [] | [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let hours = digits(rest, 1, 3)?;
            let minutes = digits(rest, 4, 6)?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = (hours * 3600 + minutes * 60) as i64;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };

    let days = days_from_civil(year as i64, month, day);
    let seconds = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64 - offset_seconds;
    let seconds = u64::try_from(seconds).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(seconds, nanos as u32))
}

/// The decimal number in `text[from..to]`, digits only.
fn digits(text: &str, from: usize, to: usize) -> Option<u64> {
    let part = text.get(from..to)?;
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: u64, day: u64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = month as i64;
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64, millis: u64) -> Option<SystemTime> {
        Some(UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis))
    }

    #[test]
    fn reads_javascript_iso_strings_and_the_frameworks_own() {
        // new Date().toISOString() in the article's Node consumer.
        assert_eq!(
            parse_failed_at("2026-12-02T10:40:07.121Z"),
            at(1_796_208_007, 121)
        );
        // Whole seconds, lower case, a space, padding around it.
        assert_eq!(
            parse_failed_at(" 2026-12-02t10:40:07z "),
            at(1_796_208_007, 0)
        );
        assert_eq!(
            parse_failed_at("2026-12-02 10:40:07Z"),
            at(1_796_208_007, 0)
        );
        // Microseconds and nanoseconds (other clients), digits past nine ignored.
        assert_eq!(
            parse_failed_at("2026-12-02T10:40:07.121000Z"),
            at(1_796_208_007, 121)
        );
        assert_eq!(
            parse_failed_at("2026-12-02T10:40:07.1210000001Z"),
            at(1_796_208_007, 121)
        );
        // Offsets.
        assert_eq!(
            parse_failed_at("2024-02-29T12:00:00+02:00"),
            at(1_709_200_800, 0)
        );
        assert_eq!(
            parse_failed_at("2024-02-29T05:30:00-04:30"),
            at(1_709_200_800, 0)
        );
        assert_eq!(parse_failed_at("1970-01-01T00:00:00Z"), at(0, 0));
        // No offset: UTC, as Python's utcnow().isoformat() means it.
        assert_eq!(
            parse_failed_at("2026-12-02T10:40:07.121000"),
            at(1_796_208_007, 121)
        );
        assert_eq!(parse_failed_at("2000-01-01T00:00:00Z"), at(946_684_800, 0));
    }

    #[test]
    fn refuses_what_is_not_an_instant() {
        for bad in [
            "",
            "-",
            "2026-12-02",
            "2026-12-02T10:40:07.Z",    // empty fraction
            "2026-13-02T10:40:07Z",     // month 13
            "2025-02-29T10:40:07Z",     // not a leap year
            "2026-12-02T24:00:00Z",     // hour 24
            "2026-12-02T10:40:07+2:00", // short offset
            "2026-12-02T10:40:07Zjunk", // trailing text
            "1969-12-31T23:59:59Z",     // before 1970
            "Wed Dec 02 2026 10:40:07", // Date.toString()
            "1796208007121",            // epoch millis
            "２０２６-12-02T10:40:07Z", // non-ASCII digits
        ] {
            assert_eq!(parse_failed_at(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_day_of_a_leap_cycle_is_one_day_after_the_previous() {
        let mut previous = parse_failed_at("1999-12-31T00:00:00Z").unwrap();
        for year in 2000..2004u64 {
            for month in 1..=12 {
                for day in 1..=days_in_month(year, month) {
                    let text = format!("{year:04}-{month:02}-{day:02}T00:00:00Z");
                    let now = parse_failed_at(&text).unwrap();
                    assert_eq!(
                        now.duration_since(previous).unwrap(),
                        Duration::from_secs(86_400),
                        "{text}"
                    );
                    previous = now;
                }
            }
        }
    }
}
