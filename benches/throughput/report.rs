//! The printed report: a table per target and prefetch, the prefetch curve,
//! and with `BENCH_RESULTS` the same lines written to a file.

use crate::results;
use crate::run::samples;
use crate::say::say;
use crate::scenario::SCENARIOS;
use crate::side::Side;
use crate::target::Target;

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) fn stats(v: &[f64]) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    (median(v.to_vec()), min, max)
}

/// One target's table: every scenario, every side.
/// One line of a table: a scenario's median throughput and CPU per message
/// on one side.
pub(crate) struct Row {
    pub(crate) scenario: &'static str,
    pub(crate) side: Side,
    pub(crate) rate: f64,
    pub(crate) cpu_us: f64,
}

/// The median of what was measured, when anything was.
pub(crate) fn median_of(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| median(v.to_vec()))
}

/// One target's table at one prefetch: every scenario, every side.
pub(crate) async fn table(
    target: &Target,
    sides: &[Side],
    n: usize,
    n_s1: usize,
    reps: usize,
    prefetch: u16,
    only: &str,
) -> Vec<Row> {
    let mut rows = Vec::new();
    say!(
        "\n{} ({} queues at {}), prefetch {prefetch}",
        target.name,
        target.queue_type.as_str(),
        target
            .url
            .split(',')
            .map(|u| u.rsplit('@').next().unwrap_or(u).trim_end_matches("/%2f"))
            .collect::<Vec<_>>()
            .join(",")
    );
    say!(
        "{:<4} {:<29} {:>10} {:>10} {:>10} {:>11} {:>11} {:>6}   framework/baseline: throughput, CPU, broker CPU",
        "",
        "side",
        "msg/s med",
        "min",
        "max",
        "CPU µs/msg",
        "broker µs",
        "dups"
    );
    for scenario in SCENARIOS {
        if !only.is_empty() && !only.split(',').any(|o| o == scenario.name) {
            continue;
        }
        // S1 and S4, where most messages succeed, last long enough to read.
        let n = if matches!(scenario.name, "S1" | "S4") {
            n_s1
        } else {
            n
        };
        let (samples, brokers) = samples(target, sides, scenario, n, reps, prefetch).await;
        let summary: Vec<((f64, f64, f64), f64)> = samples
            .iter()
            .map(|(rates, cpus, _)| {
                if rates.is_empty() {
                    ((0.0, 0.0, 0.0), 0.0)
                } else {
                    (stats(rates), median(cpus.clone()))
                }
            })
            .collect();
        for (i, side) in sides.iter().enumerate() {
            if !side.runs(scenario) {
                continue;
            }
            let (rate, cpu) = summary[i];
            let broker = median_of(&brokers[i]);
            let ratio = ratio(sides, &summary, &brokers, i);
            say!(
                "{:<4} {:<29} {:>10.0} {:>10.0} {:>10.0} {:>11.1} {:>11} {:>6}   {}",
                scenario.name,
                side.name(),
                rate.0,
                rate.1,
                rate.2,
                cpu,
                broker.map_or("-".to_owned(), |b| format!("{b:.1}")),
                samples[i].2,
                ratio
            );
            rows.push(Row {
                scenario: scenario.name,
                side: *side,
                rate: rate.0,
                cpu_us: cpu,
            });
        }
        for line in paired_lines(sides, &samples, &brokers) {
            say!("{line}");
        }
        say!("     ({})", scenario.what);
    }
    rows
}

/// Side `a`'s figure ÷ side `b`'s, round by round (the two ran one after
/// the other in each round): the median of those ratios, the lowest, the
/// highest, and in how many rounds the ratio was 1.0 or more. Drift that
/// lasts longer than a round moves both sides of a round's ratio alike,
/// so it does not move these ratios as it moves the ratio of two sides'
/// medians. `None` unless both sides have a figure for every round.
fn paired(a: &[f64], b: &[f64]) -> Option<(f64, f64, f64, usize)> {
    if a.is_empty() || a.len() != b.len() {
        return None;
    }
    let ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    let (median, min, max) = stats(&ratios);
    let at_least_par = ratios.iter().filter(|r| **r >= 1.0).count();
    Some((median, min, max, at_least_par))
}

/// The round-by-round ratios of `framework` to each AMQP 0.9.1 loop that
/// ran beside it, and of `framework-scheduled` to each loop: throughput, and the
/// broker's CPU per message.
fn paired_lines(
    sides: &[Side],
    samples: &[(Vec<f64>, Vec<f64>, usize)],
    brokers: &[Vec<f64>],
) -> Vec<String> {
    let mut lines = Vec::new();
    for (f, framework) in sides.iter().enumerate() {
        if !matches!(framework, Side::Framework | Side::FrameworkScheduled) {
            continue;
        }
        for (b, baseline) in sides.iter().enumerate() {
            // The framework with tiers beside the AMQP 0.9.1 loops; with
            // `"scheduled"`, beside every loop.
            if baseline.is_framework()
                || (*framework == Side::Framework && *baseline == Side::Amqp1Loop)
            {
                continue;
            }
            let Some((rate, low, high, wins)) = paired(&samples[f].0, &samples[b].0) else {
                continue;
            };
            let rounds = samples[f].0.len();
            let broker = paired(&brokers[f], &brokers[b])
                .map_or(String::new(), |(m, lo, hi, _)| {
                    format!("; broker CPU {m:.2}x ({lo:.2}-{hi:.2})")
                });
            lines.push(format!(
                "     paired by round, {} / {}: throughput {rate:.2}x ({low:.2}-{high:.2}, >= 1.0 in {wins} of {rounds}){broker}",
                framework.name(),
                baseline.name()
            ));
        }
    }
    lines
}

/// Throughput and CPU per message against the prefetch, scenario by
/// scenario and side by side, from the tables measured.
pub(crate) fn curve(measured: &[(u16, Vec<Row>)], sides: &[Side]) {
    say!("\nprefetch curve (median msg/s, CPU µs/msg):");
    let scenarios: Vec<&str> = SCENARIOS
        .iter()
        .map(|s| s.name)
        .filter(|name| {
            measured
                .iter()
                .any(|(_, rows)| rows.iter().any(|r| r.scenario == *name))
        })
        .collect();
    for scenario in scenarios {
        for side in sides {
            let mut line = format!("{scenario:<4} {:<10}", side.name());
            for (prefetch, rows) in measured {
                if let Some(row) = rows
                    .iter()
                    .find(|r| r.scenario == scenario && r.side == *side)
                {
                    line.push_str(&format!(
                        "  p{prefetch}: {:>6.0} {:>5.1}",
                        row.rate, row.cpu_us
                    ));
                }
            }
            say!("{line}");
        }
    }
}

/// With `BENCH_RESULTS`, the report printed so far written to the file it
/// names, under a header that names, among the rest, the RabbitMQ release
/// of each of `targets` (as its first node names it when a connection
/// opens).
pub(crate) async fn write_results(targets: &[Target]) {
    if !results::wanted() {
        return;
    }
    let mut brokers = Vec::new();
    for target in targets {
        let release = match rabbit_backoff::connect(target.first_node()).await {
            Ok(connection) => {
                let release = connection.release().map_or_else(
                    || "unknown".to_owned(),
                    |r| format!("{} {}", r.product, r.version),
                );
                connection.close().await;
                release
            }
            Err(e) => format!("unknown ({e})"),
        };
        let node = results::without_password(target.first_node());
        brokers.push((format!("{} at {node}", target.name), release));
    }
    results::write("throughput", &brokers);
}

/// The ratios printed beside side `i`'s row: a baseline's, the framework's
/// to it; a variant of the framework's, its own to the framework (or to
/// `framework-scheduled`, `amqp1-loop`, `framework-delayed`, as the side
/// says); and beside each baseline the scheduled framework's, when it ran.
fn ratio(
    sides: &[Side],
    summary: &[((f64, f64, f64), f64)],
    brokers: &[Vec<f64>],
    i: usize,
) -> String {
    let side = &sides[i];
    let (rate, cpu) = summary[i];
    let broker = median_of(&brokers[i]);
    let framework_at = sides.iter().position(|s| *s == Side::Framework);
    let scheduled_at = sides.iter().position(|s| *s == Side::FrameworkScheduled);
    let delayed_at = sides.iter().position(|s| *s == Side::FrameworkDelayed);
    let amqp1_loop_at = sides.iter().position(|s| *s == Side::Amqp1Loop);
    // Side `a` to side `b`: throughput, CPU per message, the broker's.
    let to = |a: usize, b: usize| {
        format!(
            "{:.2}x, {:.2}x{}",
            summary[a].0.0 / summary[b].0.0,
            summary[a].1 / summary[b].1,
            match (median_of(&brokers[a]), median_of(&brokers[b])) {
                (Some(a), Some(b)) => format!(", {:.2}x", a / b),
                _ => String::new(),
            }
        )
    };
    let broker_ratio = |f: usize| match (median_of(&brokers[f]), broker) {
        (Some(ours), Some(theirs)) => format!(", {:.2}x", ours / theirs),
        _ => String::new(),
    };
    // Side `i` to each of `others` that ran, by name.
    let to_each = |others: [(Option<usize>, &str); 2]| {
        others
            .into_iter()
            .filter_map(|(at, name)| at.map(|j| format!("{} of {name}", to(i, j))))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut ratio = match framework_at {
        // Without its index: to the scheduled framework with it,
        // and to the hand-written loop, which writes no index.
        _ if *side == Side::FrameworkScheduledUnindexed => to_each([
            (scheduled_at, "framework-scheduled"),
            (amqp1_loop_at, "amqp1-loop"),
        ]),
        // `retry = "scheduled"`: to the framework with tiers, and
        // with `retry = "delayed"`.
        _ if *side == Side::FrameworkScheduled => to_each([
            (framework_at, "the framework with retry tiers"),
            (delayed_at, "framework-delayed"),
        ]),
        Some(f) if side.dedupe() => format!(
            "{:.2}x, {:.2}x of the framework without dedupe",
            rate.0 / summary[f].0.0,
            cpu / summary[f].1
        ),
        // A variant of the framework: its own ratios to the framework.
        Some(f) if matches!(side, Side::FrameworkDelayed | Side::FrameworkUnindexed) => {
            format!(
                "{:.2}x, {:.2}x{} of the framework {}",
                rate.0 / summary[f].0.0,
                cpu / summary[f].1,
                match (median_of(&brokers[f]), broker) {
                    (Some(theirs), Some(variant)) => {
                        format!(", {:.2}x", variant / theirs)
                    }
                    _ => String::new(),
                },
                if *side == Side::FrameworkDelayed {
                    "with retry tiers"
                } else {
                    "with its index"
                }
            )
        }
        Some(f) if *side != Side::Framework => {
            format!(
                "{:.2}x, {:.2}x{}",
                summary[f].0.0 / rate.0,
                summary[f].1 / cpu,
                broker_ratio(f)
            )
        }
        _ => String::new(),
    };
    // Beside each baseline, the scheduled framework's ratios to it.
    if let Some(sched) = scheduled_at
        && !side.is_framework()
    {
        if !ratio.is_empty() {
            ratio.push_str("; ");
        }
        ratio.push_str(&format!("scheduled {}", to(sched, i)));
    }
    ratio
}
