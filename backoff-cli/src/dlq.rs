use std::process::ExitCode;

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use clap::{Args, Subcommand};
use rabbit_backoff::dead_letters::{
    DeadLetterFilter, DeadLetterMessage, DeadLetterRecord, DeadLetterReport, Dlq, ReplayOptions,
    SourcedGroup,
};

use crate::consumer_args::ConsumerArgs;
use crate::group_source;
use crate::json_output;
use crate::replay_job::{self, JobArgs};
use crate::selection_args::SelectionArgs;
use crate::stream_port_args::StreamPortArgs;
use crate::table;

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Show dead-lettered messages without removing them or changing their order.
    ///
    /// Every message is read and put back in its place; the broker sets the
    /// `redelivered` flag of the messages it puts back.
    Peek {
        #[command(flatten)]
        selection: SelectionArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Move matching messages back to the work queue they failed in, with
    /// x-retry-count reset to 0 and their failure headers kept in
    /// x-replay-history. Each is confirmed by the broker before it leaves the
    /// dead-letter queue; the others stay, in order.
    ///
    /// With --canary N, a job that watches its copies' fates: N first, then
    /// waves while their failures stay at or under --stop-above. It exits
    /// with status 3 when it stopped itself. --status, --pause, --resume and
    /// --stop act on a job, wherever it runs.
    Replay {
        #[command(flatten)]
        selection: SelectionArgs,
        #[command(flatten)]
        replay: ReplayArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Group dead letters by reason and error fingerprint (the error with
    /// numbers, UUIDs, hex ids and quoted values masked): count, first and
    /// last failure, an example. Group ids are stable; `--group ID` selects a
    /// group in peek, replay, discard and export.
    Groups {
        #[command(flatten)]
        selection: SelectionArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        stream: StreamPortArgs,
    },
    /// Write matching messages to a file, one JSON object per line: every
    /// property, every header with its AMQP type, the body in base64. Nothing
    /// is removed.
    Export {
        #[command(flatten)]
        selection: SelectionArgs,
        /// The file to write (`-` for standard output).
        #[arg(long, value_name = "FILE")]
        jsonl: std::path::PathBuf,
        /// Print JSON instead of a line of text.
        #[arg(long)]
        json: bool,
    },
    /// Publish the messages of an export file to the dead-letter queue,
    /// exactly as they were exported (properties, header types, body), in
    /// order, each confirmed. The whole file is read and checked before
    /// anything is published.
    Import {
        #[command(flatten)]
        consumer: ConsumerArgs,
        /// The file to read.
        #[arg(long, value_name = "FILE")]
        jsonl: std::path::PathBuf,
        /// Print JSON instead of a line of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove every ready message of the dead-letter queue for good, at once
    /// (the broker's `queue.purge`, no pass), and leave an empty checkpoint
    /// in the dead-letter index so that `dlq groups` keeps answering from
    /// it. Messages held unacknowledged stay.
    Purge {
        #[command(flatten)]
        consumer: ConsumerArgs,
        /// Confirm: without it, nothing is removed.
        #[arg(long)]
        yes: bool,
        /// Print JSON instead of a line of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove matching messages for good.
    Discard {
        #[command(flatten)]
        selection: SelectionArgs,
        /// Confirm: without it, nothing is removed.
        #[arg(long)]
        yes: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Publish to this exchange instead [default: the default exchange, to the work queue].
    #[arg(long, value_name = "NAME")]
    to_exchange: Option<String>,
    /// With this routing key instead [default: the work queue the message failed in].
    #[arg(long, value_name = "KEY")]
    to_routing_key: Option<String>,
    /// At most this many messages a second, e.g. 50/s.
    #[arg(long, value_name = "N/s", value_parser = parse_rate)]
    rate: Option<f64>,
    /// Show what would move, and move nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    job: Box<JobArgs>,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let number = s.trim().trim_end_matches("/s");
    match number.parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate.is_finite() => Ok(rate),
        _ => Err(format!("`{s}` is not a rate; write e.g. 50/s")),
    }
}

pub async fn run(url: &str, command: DlqCommand) -> Result<ExitCode, String> {
    match command {
        DlqCommand::Peek { selection, json } => {
            operate(url, &selection, json, Operation::Peek).await
        }
        DlqCommand::Replay {
            selection,
            replay,
            json,
        } => operate(url, &selection, json, Operation::Replay(replay)).await,
        DlqCommand::Discard {
            selection,
            yes,
            json,
        } => operate(url, &selection, json, Operation::Discard { yes }).await,
        DlqCommand::Groups {
            selection,
            json,
            stream,
        } => {
            let filter = selection.filter.filter()?;
            groups(url, &selection.consumer, &filter, json, stream).await
        }
        DlqCommand::Export {
            selection,
            jsonl,
            json,
        } => {
            let filter = selection.filter.filter()?;
            export(url, &selection.consumer, &filter, &jsonl, json).await
        }
        DlqCommand::Import {
            consumer,
            jsonl,
            json,
        } => import(url, &consumer, &jsonl, json).await,
        DlqCommand::Purge {
            consumer,
            yes,
            json,
        } => purge(url, &consumer, yes, json).await,
    }
}

async fn purge(
    url: &str,
    consumer: &ConsumerArgs,
    yes: bool,
    json: bool,
) -> Result<ExitCode, String> {
    if !yes {
        return Err("purge removes every dead letter for good; add --yes to confirm (see what it holds with `dlq groups` first)".into());
    }
    let dlq = connect(url, consumer).await?;
    let report = dlq.purge().await;
    dlq.close().await;
    let report = report.map_err(|e| e.to_string())?;
    if json {
        json_output::print(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let note = match &report.checkpoint {
        Some(note) => format!(" ({note})"),
        None => String::new(),
    };
    println!(
        "{}: purged {}{note}",
        dlq.dead_letter_queue(),
        report.purged
    );
    Ok(ExitCode::SUCCESS)
}

async fn connect(url: &str, consumer: &ConsumerArgs) -> Result<Dlq, String> {
    Dlq::connect(url, &consumer.spec()?)
        .await
        .map_err(|e| e.to_string())
}

async fn groups(
    url: &str,
    consumer: &ConsumerArgs,
    filter: &DeadLetterFilter,
    json: bool,
    stream: StreamPortArgs,
) -> Result<ExitCode, String> {
    let dlq = stream.apply(connect(url, consumer).await?);
    let report = dlq.group_report(filter).await;
    dlq.close().await;
    let report = report.map_err(|e| e.to_string())?;
    let read_from = group_source::read_from(&report);
    if json {
        json_output::print(&SourcedGroup::all(&report))?;
        eprintln!("{}: {read_from}", dlq.dead_letter_queue());
        return Ok(ExitCode::SUCCESS);
    }
    let groups = &report.groups;
    let text = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".to_owned());
    let rows: Vec<Vec<String>> = groups
        .iter()
        .map(|g| {
            vec![
                g.id.clone(),
                g.count.to_string(),
                g.reason.clone(),
                text(&g.first_failed_at),
                text(&g.last_failed_at),
                text(&g.example_message_id),
                shorten(g.fingerprint.clone(), 70),
            ]
        })
        .collect();
    table::print(
        &[
            "GROUP", "COUNT", "REASON", "FIRST", "LAST", "EXAMPLE", "ERROR",
        ],
        &rows,
    );
    let total: usize = groups.iter().map(|g| g.count).sum();
    let plural = if groups.len() == 1 { "group" } else { "groups" };
    println!(
        "{}: {total} dead letters in {} {plural} ({read_from})",
        dlq.dead_letter_queue(),
        groups.len()
    );
    Ok(ExitCode::SUCCESS)
}

async fn export(
    url: &str,
    consumer: &ConsumerArgs,
    filter: &DeadLetterFilter,
    path: &Path,
    json: bool,
) -> Result<ExitCode, String> {
    let dlq = connect(url, consumer).await?;
    let to_stdout = path == Path::new("-");
    let mut out: Box<dyn Write + Send> = if to_stdout {
        Box::new(std::io::stdout())
    } else {
        let file = std::fs::File::create(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Box::new(BufWriter::new(file))
    };
    let report = dlq.export(filter, &mut *out).await;
    dlq.close().await;
    let report = report.map_err(|e| e.to_string())?;
    for skipped in &report.skipped {
        eprintln!(
            "not exported: message {} ({}): {}",
            skipped.message.position,
            skipped.message.message_id.as_deref().unwrap_or("-"),
            skipped.reason
        );
    }
    if json {
        eprintln!("{}", json_output::to_text(&report)?);
    } else if !to_stdout {
        println!(
            "{}: exported {} to {}, {} left in the queue",
            dlq.dead_letter_queue(),
            report.exported,
            path.display(),
            report.kept
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn import(
    url: &str,
    consumer: &ConsumerArgs,
    path: &Path,
    json: bool,
) -> Result<ExitCode, String> {
    let open = || {
        std::fs::File::open(path)
            .map(BufReader::new)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    // Check every line first: a bad line publishes nothing.
    let mut lines = 0;
    for (number, line) in open()?.lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: DeadLetterRecord = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{}: {e}", path.display(), number + 1))?;
        record
            .message()
            .map_err(|e| format!("{}:{}: {e}", path.display(), number + 1))?;
        lines += 1;
    }
    let records = open()?
        .lines()
        .map_while(Result::ok)
        .filter(|line| !line.trim().is_empty())
        .filter_map(|line| serde_json::from_str::<DeadLetterRecord>(&line).ok());
    let dlq = connect(url, consumer).await?;
    let imported = dlq.import(records).await;
    dlq.close().await;
    let imported = imported.map_err(|e| e.to_string())?;
    if imported != lines {
        return Err(format!(
            "{}: {lines} records checked, but {imported} imported (the file changed while it was read?)",
            path.display()
        ));
    }
    if json {
        println!("{}", serde_json::json!({ "imported": imported }));
    } else {
        println!(
            "{}: imported {imported} from {}",
            dlq.dead_letter_queue(),
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What `peek`, `replay` and `discard` do with the dead letters they select.
enum Operation {
    Peek,
    Replay(ReplayArgs),
    Discard { yes: bool },
}

async fn operate(
    url: &str,
    selection: &SelectionArgs,
    json: bool,
    operation: Operation,
) -> Result<ExitCode, String> {
    let filter = selection.filter.filter()?;
    if let Operation::Discard { yes: false } = operation {
        return Err("discard removes messages for good; add --yes to confirm (see what matches with `dlq peek` first)".into());
    }
    let dlq = connect(url, &selection.consumer).await?;
    let (verb, report) = match operation {
        Operation::Peek => ("matched", dlq.peek(&filter).await),
        Operation::Replay(replay) if replay.job.is_job() && !replay.dry_run => {
            let mut options = ReplayOptions::default();
            options.to_exchange = replay.to_exchange;
            options.to_routing_key = replay.to_routing_key;
            options.rate = replay.rate;
            let done = replay_job::run(&dlq, &filter, options, &replay.job, json).await;
            dlq.close().await;
            return done;
        }
        Operation::Replay(replay) => {
            let mut options = ReplayOptions::default().dry_run(replay.dry_run);
            options.to_exchange = replay.to_exchange;
            options.to_routing_key = replay.to_routing_key;
            options.rate = replay.rate;
            (
                if replay.dry_run {
                    "would replay"
                } else {
                    "replayed"
                },
                dlq.replay(&filter, &options).await,
            )
        }
        Operation::Discard { .. } => ("discarded", dlq.discard(&filter).await),
    };
    let queue = dlq.dead_letter_queue().to_owned();
    dlq.close().await;
    let report = report.map_err(|e| e.to_string())?;
    print_report(&queue, verb, &report, json)?;
    Ok(ExitCode::SUCCESS)
}

fn shorten(s: String, n: usize) -> String {
    if s.chars().count() > n {
        s.chars().take(n).collect::<String>() + "…"
    } else {
        s
    }
}

fn print_report(
    queue: &str,
    verb: &str,
    report: &DeadLetterReport,
    json: bool,
) -> Result<(), String> {
    if json {
        json_output::print(report)?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = report.matched.iter().map(row).collect();
    table::print(
        &[
            "#",
            "MESSAGE ID",
            "ROUTING KEY",
            "COUNT",
            "REASON",
            "FAILED AT",
            "ERROR",
            "BODY",
        ],
        &rows,
    );
    println!(
        "{queue}: {verb} {}, {} left in the queue",
        report.matched.len(),
        report.kept
    );
    Ok(())
}

fn row(m: &DeadLetterMessage) -> Vec<String> {
    let text = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".to_owned());
    vec![
        m.position.to_string(),
        text(&m.message_id),
        text(&m.routing_key),
        m.retry_count.map_or("-".to_owned(), |c| c.to_string()),
        text(&m.reason),
        text(&m.failed_at),
        shorten(text(&m.error), 60),
        shorten(m.body_preview.replace('\n', " "), 40),
    ]
}
