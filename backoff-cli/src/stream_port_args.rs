//! `--stream-port`: where the dead-letter index is read over RabbitMQ's
//! stream protocol, for `dlq groups` and the console.

use clap::Args;
use rabbit_backoff::dead_letters::Dlq;

/// The broker's stream port, where the dead-letter index is read.
#[derive(Debug, Clone, Copy, Args)]
pub struct StreamPortArgs {
    /// The broker's stream port (plugin rabbitmq_stream), on the AMQP URL's
    /// host: the dead-letter index is read there, or over AMQP when it does
    /// not answer (or with 0).
    #[arg(
        long,
        env = "RABBITMQ_STREAM_PORT",
        value_name = "PORT",
        default_value_t = rabbit_backoff::dead_letters::DEFAULT_STREAM_PORT
    )]
    pub stream_port: u16,
}

impl StreamPortArgs {
    /// `dlq`, reading the index at this port (only over AMQP with 0).
    pub fn apply(self, dlq: Dlq) -> Dlq {
        dlq.stream_port(self.stream_port)
            .stream_protocol(self.stream_port != 0)
    }
}
