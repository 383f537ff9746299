use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::{console, dlq, status, topology};

/// Operate rabbit-backoff consumers: see what waits in each retry tier and in
/// the dead-letter queue, understand why messages failed, replay them once the
/// cause is fixed, and export the topology.
///
/// A consumer is named the way `#[backoff_consumer]` names it: `--queue orders`
/// derives every default name (orders.retry_5000ms, orders.dlq, …); the other
/// flags override single names, so an existing topology can be operated too.
#[derive(Debug, Parser)]
#[command(name = "rabbit-backoff", version, propagate_version = true)]
pub struct Cli {
    /// The broker.
    #[arg(
        long,
        env = "AMQP_URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f",
        global = true
    )]
    pub url: String,

    #[command(subcommand)]
    pub command: Command,
}

/// A command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Depth and consumers of the work queue, every retry tier and the dead-letter queue.
    ///
    /// Retry tiers of an older schedule that still exist are found through the
    /// management API when it answers.
    Status(status::StatusArgs),
    /// Look at, replay or discard dead-lettered messages.
    #[command(subcommand)]
    Dlq(dlq::DlqCommand),
    /// Print the queues, exchanges, bindings and arguments a consumer declares,
    /// or export them as a definitions file for `rabbitmqctl import_definitions`.
    Topology(topology::TopologyArgs),
    /// A web page for operators: every consumer found on the broker with the
    /// depth of each tier and what waits in it, its dead letters grouped by
    /// error and charted over time, searched and paged, one message's headers
    /// and body, export, and replay, edit or discard of one message, a
    /// selection, a group or every match, each recorded in an audit log.
    ///
    /// Listens on 127.0.0.1:8080. Replay and discard need the token: the value
    /// of RABBIT_BACKOFF_CONSOLE_TOKEN, or one drawn at start and printed.
    Console(console::ConsoleArgs),
}

impl Cli {
    pub async fn run(self) -> Result<ExitCode, String> {
        match self.command {
            Command::Status(args) => status::run(&self.url, args).await,
            Command::Dlq(command) => dlq::run(&self.url, command).await,
            Command::Topology(args) => topology::run(&self.url, args).await,
            Command::Console(args) => console::run(&self.url, args).await,
        }
    }
}
