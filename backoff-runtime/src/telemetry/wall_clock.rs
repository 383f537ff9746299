//! The framework's wall clock: the system's, moved by however far tokio's
//! clock stands from real time, ahead or behind. In production the two
//! clocks agree and this is `SystemTime::now()`; under
//! `#[tokio::test(start_paused = true)]` the timestamps the framework writes
//! (`x-failed-at`, `x-first-failed-at`, `x-opt-delivery-time`) and the ages
//! it reads (`max_age`) follow virtual time, so a one-hour deadline plays
//! out in milliseconds, and two reads at one virtual instant agree however
//! much real time passed between them.

use std::time::{Instant, SystemTime};

/// Now, on the framework's clock.
pub(crate) fn now() -> SystemTime {
    let virtual_now = tokio::time::Instant::now().into_std();
    let real_now = Instant::now();
    let wall = SystemTime::now();
    match virtual_now.checked_duration_since(real_now) {
        Some(ahead) => wall + ahead,
        None => wall - real_now.duration_since(virtual_now),
    }
}

/// A time written as RFC 3339 in UTC with milliseconds
/// (`2026-01-01T00:00:00.000Z`), on the stack.
pub(crate) struct Stamp {
    text: [u8; STAMP_LEN],
    len: usize,
}

/// Room for the longest stamp the clock writes (24 bytes until the year 9999).
const STAMP_LEN: usize = 32;

impl Stamp {
    /// `time` as a stamp.
    pub(crate) fn of(time: SystemTime) -> Self {
        use std::fmt::Write;
        let mut stamp = Stamp {
            text: [0; STAMP_LEN],
            len: 0,
        };
        // humantime writes at most 30 bytes; a longer one would be cut, never overflow.
        let _ = write!(stamp, "{}", humantime::format_rfc3339_millis(time));
        stamp
    }

    /// Now, on the framework's clock.
    pub(crate) fn now() -> Self {
        Self::of(now())
    }
}

impl std::fmt::Write for Stamp {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let Some(room) = self.text.get_mut(self.len..end) else {
            return Err(std::fmt::Error);
        };
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl std::ops::Deref for Stamp {
    type Target = str;

    fn deref(&self) -> &str {
        // Only whole `str`s are written into it.
        std::str::from_utf8(&self.text[..self.len]).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn a_stamp_is_rfc3339_with_milliseconds_in_utc() {
        let time = UNIX_EPOCH + Duration::from_millis(1_767_225_600_123);
        assert_eq!(&*Stamp::of(time), "2026-01-01T00:00:00.123Z");
        assert_eq!(
            &*Stamp::of(time),
            humantime::format_rfc3339_millis(time).to_string()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn under_paused_time_the_clock_moves_only_with_tokio() {
        // The system's clock and the monotonic one are read a moment apart
        // (about a microsecond; more if the thread is preempted between the
        // two), so two reads may differ by that moment.
        let near = |a: SystemTime, b: SystemTime| {
            a.duration_since(b).unwrap_or_else(|e| e.duration()) < Duration::from_millis(10)
        };
        let before = now();
        std::thread::sleep(Duration::from_millis(50));
        let after = now();
        assert!(
            near(after, before),
            "50 ms of real time moved it: {before:?} → {after:?}"
        );
        tokio::time::advance(Duration::from_secs(3600)).await;
        let later = now();
        assert!(near(later, before + Duration::from_secs(3600)), "{later:?}");
    }

    #[tokio::test]
    async fn on_a_running_clock_it_is_the_system_clock() {
        // Bracketed by two reads of the system's clock, so that a thread
        // preempted between them cannot fail it.
        let slack = Duration::from_millis(1);
        let before = SystemTime::now();
        let ours = now();
        let after = SystemTime::now();
        assert!(
            before - slack <= ours && ours <= after + slack,
            "{before:?} ≤ {ours:?} ≤ {after:?}"
        );
    }
}
