//! [`Classify`]: how an error type says whether retrying can help
//! ([`ErrorClass`], [`Verdict`]).

/// Whether retrying a failed message can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The failure may go away (a timeout, a database that is down): retry after
    /// the next delay of the schedule.
    Transient,
    /// Retrying cannot help (invalid input): dead-letter at once.
    Permanent,
}

/// What a failure asks the framework to do with its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// Retry on the consumer's ladder (`#[transient]`, the default).
    Retry,
    /// Dead-letter at once: retrying cannot help (`#[permanent]`).
    DeadLetter,
    /// Acknowledge and drop: the message is obsolete (`#[discard]`). Logged
    /// and counted; nothing goes to the dead-letter queue.
    Discard,
    /// Retry on this ladder, in milliseconds per tier, instead of the
    /// consumer's (`#[retry(delays = "1m,5m,30m")]`). Its delays must be
    /// listed by [`Classify::ladders`] so that their queues are declared.
    Ladder(&'static [u64]),
    /// Retry after at least this long, as a rate limit's `Retry-After` asks
    /// (`#[retry_after]` on a `Duration` field): the smallest tier of the
    /// consumer's ladder that waits as long.
    RetryAfter(std::time::Duration),
}

impl From<ErrorClass> for Verdict {
    fn from(class: ErrorClass) -> Self {
        match class {
            ErrorClass::Transient => Verdict::Retry,
            ErrorClass::Permanent => Verdict::DeadLetter,
        }
    }
}

/// How an error type tells the framework whether a failure is worth retrying.
///
/// Usually derived: `#[derive(Classify)]` makes every variant transient except
/// those marked `#[permanent]`.
///
/// ```
/// use rabbit_backoff::{Classify, ErrorClass};
///
/// enum PaymentError { Timeout, CardDeclined }
///
/// impl Classify for PaymentError {
///     fn classify(&self) -> ErrorClass {
///         match self {
///             PaymentError::Timeout => ErrorClass::Transient,
///             PaymentError::CardDeclined => ErrorClass::Permanent,
///         }
///     }
/// }
/// assert_eq!(PaymentError::CardDeclined.classify(), ErrorClass::Permanent);
/// ```
///
/// An error from another crate gets every decision the derive offers by
/// implementing [`verdict`](Classify::verdict) (and
/// [`ladders`](Classify::ladders) for its own ladders):
///
/// ```
/// use std::time::Duration;
/// use rabbit_backoff::{Classify, ErrorClass};
/// use rabbit_backoff::rules::Verdict;
///
/// struct HttpError { status: u16, retry_after: Option<Duration> }
///
/// const SLOW: &[u64] = &[60_000, 300_000, 1_800_000];
///
/// impl Classify for HttpError {
///     fn classify(&self) -> ErrorClass {
///         if self.status >= 500 || self.status == 429 { ErrorClass::Transient } else { ErrorClass::Permanent }
///     }
///     fn verdict(&self) -> Verdict {
///         match (self.status, self.retry_after) {
///             (429, Some(wait)) => Verdict::RetryAfter(wait),
///             (410, _) => Verdict::Discard,
///             (503, _) => Verdict::Ladder(SLOW),
///             _ => self.classify().into(),
///         }
///     }
///     fn ladders() -> &'static [&'static [u64]] {
///         &[SLOW]
///     }
/// }
/// let gone = HttpError { status: 410, retry_after: None };
/// assert_eq!(gone.verdict(), Verdict::Discard);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say which failures are permanent",
    label = "the handler's error type must implement `Classify`",
    note = "add `#[derive(Classify)]` to `{Self}` and mark the variants that retrying cannot fix `#[permanent]`"
)]
pub trait Classify {
    /// The class of this error.
    fn classify(&self) -> ErrorClass;

    /// What to do with the message: by default, retry a transient error on
    /// the consumer's ladder and dead-letter a permanent one.
    fn verdict(&self) -> Verdict {
        self.classify().into()
    }

    /// Every ladder [`verdict`](Classify::verdict) can return, so that the
    /// consumer declares their retry queues at start-up.
    fn ladders() -> &'static [&'static [u64]]
    where
        Self: Sized,
    {
        &[]
    }
}

impl Classify for std::convert::Infallible {
    fn classify(&self) -> ErrorClass {
        match *self {}
    }
}
