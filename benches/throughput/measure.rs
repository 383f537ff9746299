//! What this process reads of itself: the measured span's marks for
//! callgrind, its CPU time and its resident memory.

use std::time::Duration;

/// Marks the start of the measured span of a run: the consumer is started
/// next, nothing of the set-up follows. Does nothing; under callgrind,
/// `--zero-before='*measured_span_starts' --dump-before='*measured_span_ends'`
/// keeps the instructions of this span only (see PERFORMANCE.md).
#[inline(never)]
pub(crate) fn measured_span_starts() {
    std::hint::black_box(1);
}

/// Marks the end of the measured span of a run (see [`measured_span_starts`]).
#[inline(never)]
pub(crate) fn measured_span_ends() {
    std::hint::black_box(2);
}

/// User plus system CPU time of this process.
pub(crate) fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Resident memory of this process, in KiB.
pub(crate) fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
