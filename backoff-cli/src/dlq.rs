use std::process::ExitCode;

use backoff_runtime::{DeadLetterMessage, DeadLetterReport, Dlq, ReplayOptions};
use clap::{Args, Subcommand};

use crate::consumer_args::ConsumerArgs;
use crate::filter_args::FilterArgs;
use crate::table;

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Show dead-lettered messages without removing them or changing their order.
    ///
    /// Every message is read and put back in its place; the broker sets the
    /// `redelivered` flag of the messages it puts back.
    Peek {
        #[command(flatten)]
        consumer: ConsumerArgs,
        #[command(flatten)]
        filter: FilterArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Move matching messages back to the work queue they failed in, with
    /// x-retry-count reset to 0 and their failure headers kept in
    /// x-replay-history. Each is confirmed by the broker before it leaves the
    /// dead-letter queue; the others stay, in order.
    Replay {
        #[command(flatten)]
        consumer: ConsumerArgs,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        replay: ReplayArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Remove matching messages for good.
    Discard {
        #[command(flatten)]
        consumer: ConsumerArgs,
        #[command(flatten)]
        filter: FilterArgs,
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
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let number = s.trim().trim_end_matches("/s");
    match number.parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate.is_finite() => Ok(rate),
        _ => Err(format!("`{s}` is not a rate; write e.g. 50/s")),
    }
}

pub async fn run(url: &str, command: DlqCommand) -> Result<ExitCode, String> {
    let (consumer, filter, json) = match &command {
        DlqCommand::Peek {
            consumer,
            filter,
            json,
        }
        | DlqCommand::Replay {
            consumer,
            filter,
            json,
            ..
        }
        | DlqCommand::Discard {
            consumer,
            filter,
            json,
            ..
        } => (consumer, filter.filter()?, *json),
    };
    if let DlqCommand::Discard { yes: false, .. } = command {
        return Err("discard removes messages for good; add --yes to confirm (see what matches with `dlq peek` first)".into());
    }
    let dlq = Dlq::connect(url, &consumer.spec()?)
        .await
        .map_err(|e| e.to_string())?;
    let (verb, report) = match &command {
        DlqCommand::Peek { .. } => ("matched", dlq.peek(&filter).await),
        DlqCommand::Replay { replay, .. } => {
            let options = ReplayOptions {
                to_exchange: replay.to_exchange.clone(),
                to_routing_key: replay.to_routing_key.clone(),
                rate: replay.rate,
                dry_run: replay.dry_run,
            };
            (
                if replay.dry_run {
                    "would replay"
                } else {
                    "replayed"
                },
                dlq.replay(&filter, &options).await,
            )
        }
        DlqCommand::Discard { .. } => ("discarded", dlq.discard(&filter).await),
    };
    let queue = dlq.dead_letter_queue().to_owned();
    dlq.close().await;
    let report = report.map_err(|e| e.to_string())?;
    print_report(&queue, verb, &report, json)?;
    Ok(ExitCode::SUCCESS)
}

fn print_report(
    queue: &str,
    verb: &str,
    report: &DeadLetterReport,
    json: bool,
) -> Result<(), String> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).map_err(|e| e.to_string())?
        );
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
    let short = |s: String, n: usize| {
        if s.chars().count() > n {
            s.chars().take(n).collect::<String>() + "…"
        } else {
            s
        }
    };
    vec![
        m.position.to_string(),
        text(&m.message_id),
        text(&m.routing_key),
        m.retry_count.map_or("-".to_owned(), |c| c.to_string()),
        text(&m.reason),
        text(&m.failed_at),
        short(text(&m.error), 60),
        short(m.body_preview.replace('\n', " "), 40),
    ]
}
