use clap::Args;

use crate::consumer_args::ConsumerArgs;
use crate::filter_args::FilterArgs;

/// Which consumer's dead letters a command reads, and which of them.
#[derive(Debug, Args)]
pub struct SelectionArgs {
    #[command(flatten)]
    pub consumer: ConsumerArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
}
