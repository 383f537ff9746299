//! `rabbit-backoff`: operate the retry tiers and dead-letter queues of
//! rabbit-backoff consumers. See `rabbit-backoff --help`.

#![forbid(unsafe_code)]

mod cli;
mod console;
mod consumer_args;
mod dlq;
mod filter_args;
mod group_source;
mod json_output;
mod replay_job;
mod selection_args;
mod status;
mod stream_port_args;
mod table;
mod topology;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli.run().await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
