//! A bench's printed report kept in a file: when `BENCH_RESULTS` names one,
//! the lines the bench printed, exactly as printed, under a header that says
//! what was measured where: the commit, the UTC date, the machine, the
//! RabbitMQ release of each target, and the command and environment the
//! bench ran with.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::SystemTime;

/// The variable that names the file.
pub const VARIABLE: &str = "BENCH_RESULTS";

/// The variables besides `BENCH_*` that change what a bench measures.
const ENVIRONMENT: [&str; 7] = [
    "AMQP_URL",
    "CLUSTER_AMQP_URL",
    "DATABASE_URL",
    "REDIS_URL",
    "RABBITMQ_VERSION",
    "RABBITMQ_STREAM_PORT",
    "RABBIT_BACKOFF_URL_4_3",
];

/// The lines printed so far.
static PRINTED: Mutex<String> = Mutex::new(String::new());

/// Prints `line` on standard output, and keeps it for the file.
pub fn say(line: String) {
    println!("{line}");
    if let Ok(mut printed) = PRINTED.lock() {
        printed.push_str(&line);
        printed.push('\n');
    }
}

/// Whether `BENCH_RESULTS` names a file.
pub fn wanted() -> bool {
    std::env::var_os(VARIABLE).is_some_and(|path| !path.is_empty())
}

/// Writes the header and every line printed so far to the file
/// `BENCH_RESULTS` names, when it names one; `brokers` are the targets
/// measured, each with the release its node named. Fails the bench when
/// the file cannot be written.
pub fn write(bench: &str, brokers: &[(String, String)]) {
    let Some(path) = std::env::var_os(VARIABLE).filter(|path| !path.is_empty()) else {
        return;
    };
    let printed = PRINTED.lock().map(|p| p.clone()).unwrap_or_default();
    let text = format!("{}\n{printed}", header(bench, brokers));
    std::fs::write(&path, text)
        .unwrap_or_else(|e| panic!("{VARIABLE}={}: {e}", path.to_string_lossy()));
    eprintln!("the report is in {}", path.to_string_lossy());
}

/// The header: a `key: value` line each.
fn header(bench: &str, brokers: &[(String, String)]) -> String {
    let commit = output("git", &["rev-parse", "--short", "HEAD"]);
    let dirty = !output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut header = format!("bench: {bench}\n");
    let _ = writeln!(
        header,
        "commit: {commit}{}",
        if dirty {
            " (with uncommitted changes)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        header,
        "date: {} (UTC)",
        humantime::format_rfc3339_seconds(SystemTime::now())
    );
    let _ = writeln!(
        header,
        "machine: {cores} cores, {}",
        output("uname", &["-srm"])
    );
    for (target, release) in brokers {
        let _ = writeln!(header, "rabbitmq: {target}: {release}");
    }
    let args: Vec<String> = std::env::args().collect();
    let _ = writeln!(header, "command: {}", args.join(" "));
    let mut environment: Vec<(String, String)> = std::env::vars()
        .filter(|(name, _)| {
            (name.starts_with("BENCH_") && name != "BENCH_CHILD")
                || ENVIRONMENT.contains(&name.as_str())
        })
        .collect();
    environment.sort();
    for (name, value) in environment {
        let _ = writeln!(header, "env: {name}={}", without_password(&value));
    }
    header
}

/// What `program` printed, trimmed; `unknown` when it did not run.
fn output(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |out| String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        )
}

/// `value` with the password of each URL in it (`user:password@`) left out.
pub fn without_password(value: &str) -> String {
    value
        .split(',')
        .map(|url| match (url.find("://"), url.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                let userinfo = &url[scheme + 3..at];
                let user = userinfo.split(':').next().unwrap_or(userinfo);
                format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
            }
            _ => url.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",")
}
