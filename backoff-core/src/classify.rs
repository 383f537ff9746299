/// Whether retrying a failed message can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The failure may go away (a timeout, a database that is down): retry after
    /// the next delay of the schedule.
    Transient,
    /// Retrying cannot help (invalid input): dead-letter at once.
    Permanent,
}

/// How an error type tells the framework whether a failure is worth retrying.
///
/// Usually derived: `#[derive(Classify)]` makes every variant transient except
/// those marked `#[permanent]`.
///
/// ```
/// use backoff_core::{Classify, ErrorClass};
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
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say which failures are permanent",
    label = "the handler's error type must implement `Classify`",
    note = "add `#[derive(Classify)]` to `{Self}` and mark the variants that retrying cannot fix `#[permanent]`"
)]
pub trait Classify {
    /// The class of this error.
    fn classify(&self) -> ErrorClass;
}

impl Classify for std::convert::Infallible {
    fn classify(&self) -> ErrorClass {
        match *self {}
    }
}
