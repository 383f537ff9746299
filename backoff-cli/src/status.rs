use std::process::ExitCode;

use clap::Args;
use rabbit_backoff::topology::arguments as arg;
use rabbit_backoff::topology::{Argument, ArgumentDifference, Topology};
use rabbit_backoff::{ClassicOnCluster, ClusterEvidence, QueueType, RetryBackend};
use rabbit_backoff::{ConsumerStatus, connect, status};

use crate::consumer_args::ConsumerArgs;
use rabbit_backoff::dead_letters::{discovery, management};

use crate::json_output;
use crate::table;

#[derive(Debug, Args)]
#[command(mut_arg("queue", |queue| {
    queue
        .required(false)
        .default_value("")
        .hide_default_value(true)
        .help("The work queue; every default name derives from it. Without it: every consumer topology on the vhost, found through the management API")
}))]
pub struct StatusArgs {
    #[command(flatten)]
    consumer: ConsumerArgs,
    /// More consumers, with the default names of their queue.
    #[arg(long = "also", value_name = "QUEUE")]
    also: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Exit with status 2 when a dead-letter queue holds more than N messages.
    #[arg(long, value_name = "N")]
    fail_above: Option<u32>,
    /// The management API, to find retry tiers of older schedules
    /// [default: http://<broker host>:15672].
    #[arg(long, env = "RABBITMQ_MANAGEMENT_URL", value_name = "URL")]
    management_url: Option<String>,
}

pub async fn run(url: &str, args: StatusArgs) -> Result<ExitCode, String> {
    let management = args
        .management_url
        .clone()
        .or_else(|| management::default_url(url));
    let consumer = &args.consumer;
    if consumer.queue.is_empty() {
        let management = management.ok_or(
            "without --queue, status lists consumers through the management API; give its address with --management-url",
        )?;
        return discovered(url, &management, &args).await;
    }
    let mut consumers = vec![consumer.clone()];
    for queue in &args.also {
        consumers.push(ConsumerArgs {
            queue: queue.clone(),
            delays: None,
            ..consumer.clone()
        });
    }
    let listed = match &management {
        Some(api) => {
            let api = api.clone();
            let url = url.to_owned();
            tokio::task::spawn_blocking(move || management::queues(&api, &url))
                .await
                .map_err(|e| e.to_string())?
        }
        None => Err("no management API address".to_owned()),
    };
    let (listed, note) = match listed {
        Ok(queues) => (Some(queues), None),
        Err(e) => (
            None,
            Some(format!(
                "retry tiers of older schedules not searched: management API unreachable ({e})"
            )),
        ),
    };

    let other_queues: Vec<String> = listed.iter().flatten().map(|q| q.name.clone()).collect();
    let running = running_nodes(management.as_deref(), url).await;
    // A work queue's type as the broker lists it, else as the flags say.
    let classic_on_cluster: Vec<ClassicOnCluster> = consumers
        .iter()
        .filter_map(|c| {
            let found = listed
                .iter()
                .flatten()
                .find(|q| q.name == c.queue)
                .and_then(|q| q.arguments.iter().find(|(k, _)| k == arg::QUEUE_TYPE))
                .map(|(_, v)| v == &Argument::Str(QueueType::Quorum.as_str().to_owned()));
            let queue_type = match found {
                Some(true) => QueueType::Quorum,
                Some(false) => QueueType::Classic,
                None => c.queue_type,
            };
            ClassicOnCluster::found(
                &c.queue,
                queue_type,
                running.and_then(ClusterEvidence::of_running_nodes),
            )
        })
        .collect();

    let connection = connect(url).await.map_err(|e| e.to_string())?;
    let mut statuses: Vec<ConsumerStatus> = Vec::new();
    let mut differences: Vec<ArgumentDifference> = Vec::new();
    for consumer in &consumers {
        let spec = consumer.spec()?;
        // Every current retry queue: each tier's, or each jitter sub-queue.
        let delays: Vec<u64> = if consumer.delays.is_some() {
            spec.retry_delays()
        } else {
            Vec::new()
        };
        // Existing queues whose arguments differ from what this consumer
        // declares (its retry route among them): a declaring consumer would
        // fail on them, a passive one would not notice.
        if consumer.delays.is_some()
            && let Some(listed) = &listed
        {
            for queue in Topology::of(&spec).queues() {
                if let Some(found) = listed.iter().find(|q| q.name == queue.name) {
                    differences.extend(queue.differences(&found.arguments));
                }
            }
        }
        statuses.push(
            status(&*connection, &spec.names(), &delays, &other_queues)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    connection.close().await;
    // With delayed or scheduled retries the work queue holds failed messages back: they
    // are neither ready (what AMQP counts) nor in a retry queue. Only the
    // management API counts them; `None` when it is unreachable.
    let held_back: Vec<(String, RetryBackend, Option<u64>)> = consumers
        .iter()
        .filter(|c| c.retry != RetryBackend::Tiers)
        .map(|c| {
            let queue = c.queue.clone();
            let held = listed.as_ref().map(|l| {
                l.iter()
                    .find(|q| q.name == queue)
                    .map_or(0, |q| q.messages_delayed)
            });
            (queue, c.retry, held)
        })
        .collect();

    if args.json {
        let held_back: Vec<_> = held_back
            .iter()
            .map(|(queue, _, messages)| serde_json::json!({ "queue": queue, "messages": messages }))
            .collect();
        let doc = serde_json::json!({
            "consumers": statuses,
            "note": note,
            "argument_differences": differences,
            "held_back": held_back,
            "running_nodes": running,
            "classic_on_cluster": classic_json(&classic_on_cluster),
        });
        json_output::print(&doc)?;
    } else {
        let rows: Vec<Vec<String>> = statuses
            .iter()
            .flat_map(|s| &s.queues)
            .map(|q| {
                let role = match (q.role, q.current) {
                    ("retry", false) => "retry (old schedule)".to_owned(),
                    (role, _) => role.to_owned(),
                };
                let show = |n: Option<u32>| n.map_or("missing".to_owned(), |n| n.to_string());
                let delay = q.delay_ms.map(|ms| {
                    humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
                });
                vec![
                    q.name.clone(),
                    role,
                    delay.unwrap_or_default(),
                    show(q.messages),
                    show(q.consumers),
                ]
            })
            .collect();
        let mut rows = rows;
        for (queue, backend, held) in &held_back {
            rows.push(vec![
                queue.clone(),
                held_back_role(*backend),
                String::new(),
                held.map_or("unknown".to_owned(), |n| n.to_string()),
                String::new(),
            ]);
        }
        table::print(&["QUEUE", "ROLE", "DELAY", "MESSAGES", "CONSUMERS"], &rows);
        if let Some(note) = &note {
            eprintln!("note: {note}");
        }
        for warning in &classic_on_cluster {
            eprintln!("warning: {warning}");
        }
        let show = |a: &Option<Argument>| match a {
            None => "not set".to_owned(),
            Some(Argument::Int(n)) => n.to_string(),
            Some(Argument::Str(s)) => format!("{s:?}"),
            // Not reached with the core pinned exactly; `Argument` is
            // `#[non_exhaustive]`, so Rust wants this arm: as the core shows it.
            Some(other) => format!("{other:?}"),
        };
        for d in &differences {
            eprintln!(
                "note: queue {} has {} = {}, the consumer declares {}; it would fail to start (see docs/migrating.md, \"When a queue's arguments differ\")",
                d.queue,
                d.argument,
                show(&d.actual),
                show(&d.expected)
            );
        }
    }

    if let Some(limit) = args.fail_above {
        let over: Vec<String> = statuses
            .iter()
            .filter(|s| s.dead_letters() > limit)
            .map(|s| format!("{} holds {} dead letters", s.queue, s.dead_letters()))
            .collect();
        if !over.is_empty() {
            eprintln!("above --fail-above {limit}: {}", over.join("; "));
            return Ok(ExitCode::from(2));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `status` without `--queue`: every consumer topology the management API
/// shows, by shape.
async fn discovered(url: &str, management: &str, args: &StatusArgs) -> Result<ExitCode, String> {
    let consumers = discovery::discover_async(url, management).await?;
    let running = running_nodes(Some(management), url).await;
    let classic_on_cluster: Vec<ClassicOnCluster> = consumers
        .iter()
        .filter_map(|c| {
            ClassicOnCluster::found(
                &c.queue,
                c.spec.effective_queue_type(),
                running.and_then(ClusterEvidence::of_running_nodes),
            )
        })
        .collect();
    if args.json {
        let doc = serde_json::json!({
            "consumers": consumers,
            "running_nodes": running,
            "classic_on_cluster": classic_json(&classic_on_cluster),
        });
        json_output::print(&doc)?;
    } else {
        let mut rows = Vec::new();
        for c in &consumers {
            let row = |queue: &discovery::QueueDepth, role: &str, delay: String| {
                vec![
                    c.queue.clone(),
                    queue.name.clone(),
                    role.to_owned(),
                    delay,
                    queue.messages.to_string(),
                    queue.consumers.to_string(),
                ]
            };
            rows.push(row(&c.work, "work", String::new()));
            for tier in &c.tiers {
                let delay =
                    humantime::format_duration(std::time::Duration::from_millis(tier.delay_ms));
                rows.push(row(&tier.depth, "retry", delay.to_string()));
            }
            rows.push(row(&c.dead_letter, "dead-letter", String::new()));
            if let Some(held) = c.held_back {
                rows.push(vec![
                    c.queue.clone(),
                    c.queue.clone(),
                    held_back_role(c.spec.retry),
                    String::new(),
                    held.to_string(),
                    String::new(),
                ]);
            }
        }
        table::print(
            &[
                "CONSUMER",
                "QUEUE",
                "ROLE",
                "DELAY",
                "MESSAGES",
                "CONSUMERS",
            ],
            &rows,
        );
        match consumers.len() {
            1 => println!("1 consumer topology found"),
            n => println!("{n} consumer topologies found"),
        }
        for warning in &classic_on_cluster {
            eprintln!("warning: {warning}");
        }
    }
    if let Some(limit) = args.fail_above {
        let over: Vec<String> = consumers
            .iter()
            .filter(|c| c.dead_letter.messages > u64::from(limit))
            .map(|c| {
                format!(
                    "{} holds {} dead letters",
                    c.dead_letter.name, c.dead_letter.messages
                )
            })
            .collect();
        if !over.is_empty() {
            eprintln!("above --fail-above {limit}: {}", over.join("; "));
            return Ok(ExitCode::from(2));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How many nodes the management API reports running; `None` without the
/// API, or when it does not answer (the warning is then left out).
async fn running_nodes(management: Option<&str>, url: &str) -> Option<usize> {
    let (management, url) = (management?.to_owned(), url.to_owned());
    tokio::task::spawn_blocking(move || management::running_nodes(&management, &url).ok())
        .await
        .ok()
        .flatten()
}

/// The `classic_on_cluster` field of `--json`: each consumer whose queues
/// are classic on a cluster of several running nodes, with the warning.
fn classic_json(warnings: &[ClassicOnCluster]) -> serde_json::Value {
    warnings
        .iter()
        .map(|w| serde_json::json!({ "queue": w.queue, "warning": w.to_string() }))
        .collect()
}

/// The role of the row of the messages a work queue holds back: "held
/// back (delayed retries)" or "held back (scheduled retries)".
fn held_back_role(backend: RetryBackend) -> String {
    format!("held back ({backend} retries)")
}
