use std::process::ExitCode;

use clap::Args;
use rabbit_backoff::topology::check_topology;
use rabbit_backoff::topology::{Argument, Definitions, Topology};
use rabbit_backoff::{Error, connect};

use crate::consumer_args::ConsumerArgs;
use crate::json_output;
use crate::table;

#[derive(Debug, Args)]
pub struct TopologyArgs {
    #[command(flatten)]
    consumer: ConsumerArgs,
    /// Write a definitions file (`-` for standard output) that
    /// `rabbitmqctl import_definitions` accepts, instead of the table.
    #[arg(long, value_name = "FILE")]
    export_definitions: Option<String>,
    /// The vhost of the exported definitions.
    #[arg(long, default_value = "/")]
    vhost: String,
    /// Check on the broker, declaring nothing, that every exchange and queue
    /// exists, as a consumer with declare = "passive" does at start-up; exit 2
    /// naming every missing one. Queue arguments and bindings are not checked.
    #[arg(long)]
    check: bool,
}

pub async fn run(url: &str, args: TopologyArgs) -> Result<ExitCode, String> {
    if args.consumer.delays.is_none() {
        return Err(
            "--delays is needed to name the retry queues, e.g. --delays 5s,15s,60s".to_owned(),
        );
    }
    let topology = Topology::of(&args.consumer.spec()?);
    if args.check {
        let connection = connect(url).await.map_err(|e| e.to_string())?;
        let checked = check_topology(&*connection, &topology).await;
        connection.close().await;
        return match checked {
            Ok(()) => {
                let queues = topology.queues().count();
                println!(
                    "{}: all {queues} queues and 3 exchanges exist (arguments and bindings not checked)",
                    topology.work_queue.name
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(e @ Error::TopologyMissing { .. }) => {
                eprintln!("{e}");
                Ok(ExitCode::from(2))
            }
            Err(e) => Err(e.to_string()),
        };
    }
    if let Some(path) = &args.export_definitions {
        let definitions = Definitions::of(std::slice::from_ref(&topology), &args.vhost);
        let json = json_output::to_text(&definitions)?;
        if path == "-" {
            println!("{json}");
        } else {
            std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {path}: {e}"))?;
            eprintln!("wrote {path}; load it with: rabbitmqctl import_definitions {path}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let exchanges: Vec<Vec<String>> = topology
        .exchanges()
        .iter()
        .map(|e| vec![e.name.clone(), e.kind.to_string()])
        .collect();
    table::print(&["EXCHANGE", "TYPE"], &exchanges);
    println!();
    let queues: Vec<Vec<String>> = topology
        .queues()
        .map(|q| {
            let arguments: Vec<String> = q
                .arguments
                .iter()
                .map(|(k, v)| match v {
                    Argument::Int(n) => format!("{k}={n}"),
                    Argument::Str(s) => format!("{k}={s:?}"),
                    // Not reached with the core pinned exactly; `Argument` is
                    // `#[non_exhaustive]`, so Rust wants this arm: as the core shows it.
                    other => format!("{k}={other:?}"),
                })
                .collect();
            vec![q.name.clone(), arguments.join(" ")]
        })
        .collect();
    table::print(&["QUEUE", "ARGUMENTS"], &queues);
    println!();
    let bindings: Vec<Vec<String>> = topology
        .bindings
        .iter()
        .map(|b| vec![b.exchange.clone(), b.routing_key.clone(), b.queue.clone()])
        .collect();
    table::print(&["EXCHANGE", "ROUTING KEY", "QUEUE"], &bindings);
    Ok(ExitCode::SUCCESS)
}
