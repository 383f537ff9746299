//! Each side in a process of its own: this binary again, told by
//! `BENCH_CHILD` what to run, reporting one line its parent reads.

use rabbit_backoff::prelude::*;
use rabbit_backoff_core::ConsumerSpec;

use crate::child as spawn;
use crate::consume::{Run, consume};
use crate::scenario::{SCENARIOS, Scenario};
use crate::side::Side;
use crate::target::Target;
use crate::work::framework;
use crate::{broker_process, env_or};

/// Whether each side runs in a process of its own (the default;
/// `BENCH_PROCESSES=0` runs them in this one, for profilers).
pub(crate) fn processes() -> bool {
    env_or("BENCH_PROCESSES", 1) == 1
}

/// The variable that makes this binary a child that runs one side:
/// `side|target|queue|prefetch|n|scenario`.
pub(crate) const CHILD: &str = "BENCH_CHILD";

/// What marks the child's report among the lines of its standard output,
/// where a framework side's log goes too.
pub(crate) const REPORT: &str = "bench-run:";

/// How many of a child's log lines are echoed to standard error, with the
/// count of the others: the framework logs a warning per dead letter.
pub(crate) const ECHOED: usize = 3;

/// The filter of a framework side's log (`BENCH_LOG`, default `warn`);
/// `None` for `off`: no subscriber.
pub(crate) fn log_filter() -> Option<String> {
    match std::env::var("BENCH_LOG") {
        Ok(filter) if filter.trim() == "off" => None,
        Ok(filter) if !filter.trim().is_empty() => Some(filter.trim().to_owned()),
        _ => Some("warn".to_owned()),
    }
}

/// In a framework side's child: a service's log, a `fmt` subscriber with
/// the `BENCH_LOG` filter writing a line per event to standard output,
/// which the parent reads through a pipe, as a container's runtime reads a
/// service's.
pub(crate) fn install_log() {
    let Some(filter) = log_filter() else { return };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|e| panic!("BENCH_LOG={filter:?}: {e}"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout)
        .with_ansi(false)
        .init();
}

/// [`consume`] in a child process of this binary, on a multi-thread tokio
/// runtime as `#[tokio::main]` builds it: its CPU is its own, read from the
/// OS (`getrusage`) over the same span. Its log lines are echoed (the
/// first [`ECHOED`]) before anything else; `Err` when it did not run, failed
/// or printed no report.
pub(crate) async fn in_child(
    target: &Target,
    side: Side,
    scenario: Scenario,
    n: usize,
    spec: &ConsumerSpec,
) -> Result<Run, String> {
    let job = format!(
        "{}|{}|{}|{}|{n}|{}",
        side.name(),
        target.name,
        spec.queue,
        spec.prefetch,
        scenario.name
    );
    let output = spawn::run(CHILD, job)
        .await
        .map_err(|e| format!("the child does not run: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (reports, log): (Vec<&str>, Vec<&str>) =
        stdout.lines().partition(|line| line.starts_with(REPORT));
    for line in log.iter().take(ECHOED) {
        eprintln!("  [{} {} log] {line}", scenario.name, side.name());
    }
    if log.len() > ECHOED {
        eprintln!(
            "  [{} {} log] … {} more lines ({} in all)",
            scenario.name,
            side.name(),
            log.len() - ECHOED,
            log.len()
        );
    }
    if !output.status.success() {
        return Err(format!("the child failed: {}", output.status));
    }
    let line = reports
        .last()
        .ok_or("the child printed no report")?
        .trim_start_matches(REPORT);
    let fields: Vec<f64> = line
        .split_whitespace()
        .map(|f| {
            f.parse()
                .map_err(|_| format!("the child's report: {line:?}"))
        })
        .collect::<Result<_, _>>()?;
    let [elapsed, cpu, lost, duplicates, dead] = fields[..] else {
        return Err(format!("the child's report: {line:?}"));
    };
    Ok(Run {
        elapsed,
        cpu,
        lost: lost as usize,
        duplicates: duplicates as usize,
        dead: dead as usize,
    })
}

/// The child's side of [`in_child`]: runs the side it was given and prints
/// its [`Run`] as one line marked [`REPORT`]; a framework side logs to the
/// same standard output ([`install_log`]).
pub(crate) fn child(job: &str) {
    let parts: Vec<&str> = job.split('|').collect();
    let [side, target, queue, prefetch, n, scenario] = parts[..] else {
        panic!("{CHILD}: {job:?}")
    };
    let side = Side::ALL
        .into_iter()
        .find(|s| s.name() == side)
        .expect("a side");
    let target = Target::named(target).expect("a target");
    let scenario = SCENARIOS
        .into_iter()
        .find(|s| s.name == scenario)
        .expect("a scenario");
    let n: usize = n.parse().expect("a count");
    let mut spec = framework
        .spec()
        .with_prefetch(prefetch.parse().expect("a prefetch"));
    spec.queue = queue.to_owned();
    spec.queue_type = Some(target.queue_type);
    side.configure(&mut spec);
    if side.is_framework() {
        install_log();
    }
    let runtime = tokio::runtime::Runtime::new().expect("tokio");
    let run = runtime.block_on(consume(&target, side, scenario, n, &spec));
    println!(
        "{REPORT} {} {} {} {} {}",
        run.elapsed, run.cpu, run.lost, run.duplicates, run.dead
    );
}

/// The broker process that listens on the port of `target`'s first node.
pub(crate) fn broker_pid(target: &Target) -> Option<u32> {
    broker_process::listening_on(target.first_node())
}
