//! The framework beside hand-written lapin consumers, against the real
//! broker: messages per second, consumer CPU per message and the broker's
//! CPU per message, scenario by scenario, alternating the sides so that the
//! machine's noise falls on all of them. Every run checks that each message
//! was handled or dead-lettered: none lost; and reads up to 20 of its dead
//! letters, each of which must carry the article's `x-retry-count`,
//! `x-error` and `x-failed-at` (on every side, the framework's included).
//!
//! Each side runs in a process of its own (this binary again, with
//! `BENCH_CHILD` set), on a multi-thread tokio runtime as `#[tokio::main]`
//! builds it; its CPU is read from the OS (`getrusage`) over the span from
//! its start to the last message settled, and the broker's from
//! `/proc/<pid>/stat` of the process listening on the broker's port, before
//! and after. A side starts once the broker is quiet (under 5% of a core
//! for half a second), so that no side pays for what the set-up or the run
//! before left the broker to do. `BENCH_PROCESSES=0` runs the sides in this
//! process instead, for profilers (`scripts/bench-instructions.sh`).
//!
//! **Topologies.** The framework's sides run on the topology the framework
//! declares (`declare_topology`, and the dead-letter index's two streams,
//! which the consumer's index writer declares again in the run, changing
//! nothing: a service creates them once, not per run), queue
//! `bench.<8 hex>`.
//! Every hand-written side (`article`, `full`, `spawned`, `spawned-full`,
//! `guarded`, `delayed`) runs on the article's own topology, declared by the
//! bench with plain lapin calls, under a prefix `<p>` = `bench.<8 hex>`
//! unique to the run: direct `<p>.work_exchange` → durable
//! `<p>.work_queue` (key `work`; `x-dead-letter-exchange` =
//! `<p>.dlx_exchange`, `x-dead-letter-routing-key` = `dead`, as the article
//! declares it), direct `<p>.retry_exchange` → durable `<p>.retry_<ms>ms`
//! per delay (bound with its own name; `x-message-ttl` = the delay, and an
//! expired retry returns through `<p>.work_exchange` with key `work`),
//! direct `<p>.dlx_exchange` → durable `<p>.dead_letter_queue` (key
//! `dead`). No index, nothing of the framework. On a quorum target the
//! three kinds of queue are `x-queue-type = quorum`, and the work queue has
//! `x-delivery-limit` = the framework's `delivery_limit` (20); the retry
//! queues keep the article's arguments, so they dead-letter at most once,
//! the quorum default, where the framework's are `at-least-once` with
//! `x-overflow = reject-publish`. Every queue and exchange a run declared
//! is deleted after it, on both topologies.
//!
//! The baselines: `article` and `full` are the same loop, handling the
//! deliveries of one consumer with `for_each_concurrent` in its task, and
//! differ only in the headers of a dead letter: `article` writes the three
//! of the article a hand-written consumer is usually copied from
//! (`x-retry-count`, `x-error`, `x-failed-at`); `full` writes the same
//! headers as the framework (those three, `x-dead-letter-reason` and
//! `x-original-queue`/`-exchange`/`-routing-key`, leaving out, as the
//! framework does, an exchange or routing key equal to the queue's name,
//! which on the article's topology they never are), so that the broker
//! stores messages of about the same size; a first retry copy carries only
//! `x-retry-count` in both, as the framework's do without a `max_age`.
//! `spawned` is the stronger loop a careful developer writes on a
//! multi-thread runtime: `article`'s headers, one task spawned per delivery,
//! each awaiting its republish's confirm, then acking; `spawned-full` is the
//! same loop writing `full`'s headers: beside `spawned`, what the
//! framework's headers cost, and against it the framework's loop on equal
//! work. `guarded` (only when named) is `article` over a lapin connection
//! the runtime opened, behind its frame guard.
//!
//! The framework's child process logs as a service does: a
//! `tracing_subscriber::fmt()` subscriber, filtered by `BENCH_LOG` (an
//! `EnvFilter`; default `warn`; `off` installs none), writes a line per
//! event to the child's standard output, a pipe this process reads to its
//! end (the child's report is the line marked `bench-run:`; of the others,
//! the first 3 of a run and their count are echoed to standard error: at
//! `warn` the framework logs its first 10 failures a second one by one,
//! then a line that counts the rest). The hand-written
//! sides install no subscriber; nor does anything with
//! `BENCH_PROCESSES=0`.
//!
//! `scripts/bench.sh` (or `cargo bench --bench throughput`). Settings:
//! `BENCH_N` messages a run (default 10000; S1 and S4 `BENCH_N_S1`, default
//! 100000 or `BENCH_N` when larger, to last long enough to read: at 20 000
//! they take under a second), `BENCH_REPS` runs of each side
//! (default 3), `BENCH_SCENARIOS=S2,S3` to run only some,
//! `BENCH_SIDES=framework,spawned` to run only some of `framework`, `article`,
//! `spawned`, `spawned-full` and `full` (the default set; ratios are printed
//! against each baseline that ran), or the sides run only when named:
//! `guarded`, `framework-unindexed`, `framework-delayed`, `delayed`,
//! `framework-scheduled`, `amqp1-loop`, `dedupe=postgres`, `dedupe=redis`;
//! `BENCH_LOG` the framework's log filter (above),
//! `BENCH_EACH=1` to print every run as it ends (to standard error),
//! `BENCH_RESULTS=path` to write the report, as printed, to a file too,
//! under a header (commit, UTC date, machine, each target's RabbitMQ
//! release, the command and the `BENCH_*` environment),
//! `BENCH_PREFETCH` (default: the framework's default prefetch; a list such
//! as `1,10,50` measures each and prints the curve), `BENCH_MEMORY=0` to
//! skip the memory check,
//! `BENCH_TARGETS=single-classic,single-quorum,cluster-quorum` to measure
//! on several brokers and queue types in one run, a table each (default
//! `single-classic`: the local broker, `AMQP_URL`, classic queues;
//! `single-quorum`: the same broker, quorum queues; `cluster-quorum`: the
//! three-node cluster of `scripts/cluster.sh`, or `CLUSTER_AMQP_URL`, with
//! quorum queues replicated on every node, both sides connected to its
//! first node, which leads the queues). Under `cargo test` it runs once with
//! 300 messages, as a test (`BENCH_SIDES`, `BENCH_SCENARIOS`,
//! `BENCH_TARGETS` and `BENCH_LOG` apply there too).
//!
//! `framework-unindexed` (only when named): the framework with its
//! dead-letter index turned off (`dead_letter_index = DeadLetterIndex::Off`):
//! each dead letter written once, to the dead-letter queue, as on the
//! hand-written sides. Its ratios are its own to the framework with the
//! index (throughput, then CPU per message, then the broker's): what the
//! consumer's summary entries, written in batches, cost.
//!
//! `delayed` (only when named, on a quorum target of RabbitMQ 4.3): the
//! `article` loop with RabbitMQ 4.3's delayed retries instead of retry
//! tiers, on the article's topology without its retry exchange and queues:
//! the work queue is declared with `x-delayed-retry-type = failed` and
//! `x-delayed-retry-min`/`-max` = the first tier's delay, and a transient
//! failure is `basic.reject(requeue = true)`, which the queue holds back
//! that long (no copy, no `x-retry-count`, no `x-error`). Its row's ratios
//! are the framework's to it, as for the other baselines.
//!
//! `framework-delayed` (only when named, on a quorum target of RabbitMQ
//! 4.3): the framework with `retry = "delayed"`, the backend built on those
//! delayed retries (the same `x-delayed-retry-*` arguments, a transient
//! failure rejected with requeue, a dead letter still a confirmed copy with
//! the framework's headers). Its ratios are its own to the framework with
//! retry tiers (throughput, then CPU per message, then the broker's).
//!
//! `framework-scheduled` (only when named, on a quorum target of RabbitMQ
//! 4.3): the framework with `retry = "scheduled"`: it consumes its quorum
//! work queue over AMQP 1.0 (fe2o3-amqp) and settles a transient failure as
//! `modified` with `x-opt-delivery-time`, which the queue holds back; a
//! dead letter is still a confirmed AMQP 0-9-1 copy with the framework's
//! headers, then `accepted`. Its own topology has no retry queue. Its row's
//! ratios are its own to the framework with retry tiers and to
//! `framework-delayed` (when they ran), and beside each hand-written
//! baseline's row its ratios to that baseline (`scheduled …`).
//!
//! `framework-scheduled-unindexed` (only when named, on a quorum target of
//! RabbitMQ 4.3): `framework-scheduled` with its dead-letter index off, each
//! dead letter written once, as `amqp1-loop` writes it. Its ratios are its
//! own to `framework-scheduled` and to `amqp1-loop`.
//!
//! `amqp1-loop` (only when named, on a quorum target of RabbitMQ 4.3): the
//! strongest loop a careful user of fe2o3-amqp writes with the same
//! settlements ([`amqp1_loop`]), on the article's topology without retry
//! exchange and queues, its work queue declared as docs/amqp-1.0.md says
//! (`x-dead-letter-strategy = at-least-once`, `x-overflow =
//! reject-publish`, the delivery limit 20, above the one retry): a receiver
//! link whose credit keeps the prefetch unsettled, a task per delivery, a
//! retry `modified` with `x-opt-delivery-time` (now + the first delay),
//! `x-opt-retry-count` and `x-opt-error`, a dead letter a confirmed AMQP
//! 0-9-1 copy with the article's three headers, then `accepted` (the
//! framework's way, for a like-for-like comparison, rather than `modified`
//! with `undeliverable-here`, whose dead letter would carry `x-opt-error`
//! where the article promises `x-error`). On any other target or broker
//! (3.10, 4.0, classic queues) both sides are left out of the table, with a
//! line that says so: `BENCH_SIDES` naming them does not fail the run.
//!
//! Two more sides run S1 and S4 only: the framework with `dedupe` on
//! PostgreSQL (`dedupe=postgres`, `DATABASE_URL`, a pool as large as the
//! concurrency) and on Redis (`dedupe=redis`, `REDIS_URL`), each message
//! with its own `message_id`; their ratio is to the framework without
//! dedupe.

#[path = "../common/broker_process.rs"]
mod broker_process;
#[path = "../common/child.rs"]
mod child;
mod consume;
#[path = "../common/results.rs"]
mod results;

mod measure;
mod names;
mod process;
mod report;
mod run;
mod say;
mod scenario;
mod side;
mod sides;
mod target;
mod topology;
mod work;

use rabbit_backoff_core::ConsumerSpec;

use process::{CHILD, child, log_filter, processes};
use report::{curve, table, write_results};
use run::{memory_check, run_once};
use say::say;
use scenario::SCENARIOS;
use side::Side;
use target::{Target, sides_on};

pub(crate) fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if let Ok(job) = std::env::var(CHILD) {
        child(&job);
        return;
    }
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { env_or("BENCH_N", 10_000) } else { 300 };
    let reps = if full { env_or("BENCH_REPS", 3) } else { 1 };
    // S1 and S4 last long enough to read: at least 100 000 messages.
    let n_s1 = if full {
        env_or("BENCH_N_S1", n.max(100_000))
    } else {
        n
    };
    // The framework's default prefetch unless told: one value, or a list
    // for a curve.
    let default_prefetch = ConsumerSpec::new("bench", "1ms".parse().expect("a delay")).prefetch;
    let prefetches: Vec<u16> = env_or("BENCH_PREFETCH", default_prefetch.to_string())
        .split(',')
        .map(|p| {
            p.trim()
                .parse()
                .expect("BENCH_PREFETCH: numbers, comma-separated")
        })
        .collect();
    let prefetch = prefetches[0];
    let only: String = env_or("BENCH_SCENARIOS", String::new());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let sides: Vec<Side> = match std::env::var("BENCH_SIDES") {
        Ok(list) if !list.is_empty() => Side::ALL
            .into_iter()
            .filter(|side| list.split(',').any(|s| s.trim() == side.name()))
            .collect(),
        _ => Side::DEFAULT.to_vec(),
    };
    assert!(
        !sides.is_empty(),
        "BENCH_SIDES names none of {}",
        Side::ALL.map(Side::name).join(", ")
    );
    let targets: Vec<Target> = env_or("BENCH_TARGETS", String::from("single-classic"))
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            Target::named(t).unwrap_or_else(|| {
                panic!(
                    "BENCH_TARGETS: unknown target `{t}`; one of {}",
                    Target::NAMES.join(", ")
                )
            })
        })
        .collect();
    assert!(!targets.is_empty(), "BENCH_TARGETS names no target");
    rt.block_on(async {
        let names: Vec<&str> = sides.iter().map(|s| s.name()).collect();
        say!(
            "{n} messages a run (S1 and S4: {n_s1}), {reps} runs a side, prefetch = concurrency = {}, sides {} alternating, {}",
            prefetches
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            names.join(", "),
            if processes() {
                "each in a process of its own"
            } else {
                "in this process"
            }
        );
        if sides.iter().any(|side| side.is_framework()) {
            match (processes(), log_filter()) {
                (true, Some(filter)) => say!(
                    "framework log: filter {filter:?} (BENCH_LOG), a line per event on each framework child's standard output, a pipe this process reads"
                ),
                (true, None) => say!("framework log: off (BENCH_LOG=off): no subscriber"),
                (false, _) => say!("framework log: none (BENCH_PROCESSES=0: no subscriber in this process)"),
            }
        }
        for target in &targets {
            let sides = sides_on(target, &sides).await;
            if sides.is_empty() {
                continue;
            }
            let mut measured = Vec::new();
            for &prefetch in &prefetches {
                measured.push((prefetch, table(target, &sides, n, n_s1, reps, prefetch, &only).await));
            }
            if prefetches.len() > 1 {
                curve(&measured, &sides);
            }
        }

        // The rest on the default target only.
        let Some(default) = targets.iter().find(|t| t.name == "single-classic") else {
            return;
        };
        if !only.is_empty() || sides.len() < Side::DEFAULT.len() {
            return;
        }
        say!("\nS2 (republish to the dead-letter queue), framework, prefetch 1 vs 50:");
        for p in [1u16, 50] {
            let s = run_once(default, Side::Framework, SCENARIOS[1], n.min(3_000), p).await;
            say!("  prefetch {p:>2}: {:>8.0} msg/s, {:.1} µs CPU/msg", s.rate, s.cpu_us);
        }

        if full && env_or("BENCH_MEMORY", 1) == 1 {
            memory_check(default, prefetch).await;
        }
    });
    rt.block_on(write_results(&targets));
}
