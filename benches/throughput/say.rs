//! `say!`: a line of the printed report, kept for the results file.

/// Prints a line of the report, as `println!` does, and keeps it for the
/// file `BENCH_RESULTS` names.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::results::say(format!($($arg)*))
    };
}
pub(crate) use say;
