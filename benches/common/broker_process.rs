//! The broker's process, seen from the bench's machine: which process
//! listens on a node's port, whether it is quiet, and its CPU so far.

use std::time::Duration;

use tokio::time::Instant;

/// The process that listens on the port of the AMQP URL `address`, found
/// through the socket's inode (`/proc/net/tcp*`, then the processes' open
/// files); `None` when it is not on this machine or not readable.
pub fn listening_on(address: &str) -> Option<u32> {
    let host = address.rsplit('@').next()?.split('/').next()?;
    let port: u16 = host
        .rsplit_once(':')
        .map_or(Some(5672), |(_, p)| p.parse().ok())?;
    let inode = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| table.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = u16::from_str_radix(fields.get(1)?.rsplit(':').next()?, 16).ok()?;
            // 0A: listening.
            (local_port == port && *fields.get(3)? == "0A")
                .then(|| fields.get(9).map(|i| i.to_string()))?
        })?;
    let socket = format!("socket:[{inode}]");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|process| {
            let pid: u32 = process.file_name().to_str()?.parse().ok()?;
            std::fs::read_dir(process.path().join("fd"))
                .ok()?
                .flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_str() == Some(&socket)))
                .then_some(pid)
        })
}

/// Waits (at most 20 s) until the broker process `pid` has used under 5% of
/// a core over half a second: each side starts on a broker with nothing
/// left to do. Its idle VM stays under 1%.
pub async fn quiet(pid: Option<u32>) {
    const WINDOW: Duration = Duration::from_millis(500);
    let Some(pid) = pid else { return };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut before = cpu_seconds_of(pid);
    while Instant::now() < deadline {
        tokio::time::sleep(WINDOW).await;
        let now = cpu_seconds_of(pid);
        match (before, now) {
            (Some(before), Some(now)) if now - before < 0.05 * WINDOW.as_secs_f64() => return,
            (_, None) => return,
            _ => before = now,
        }
    }
    eprintln!("the broker (pid {pid}) stayed busy for 20 s before a run");
}

/// User plus system CPU seconds of process `pid` so far.
pub fn cpu_seconds_of(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((utime + stime) / ticks)
}
