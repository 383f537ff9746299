use backoff_core::{DeclareMode, ExchangeDecl, ExchangeKind, Topology};
use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::FieldTable;
use lapin::{Connection, ErrorKind};

use crate::operations::status::{exchange_exists, inspect_queue};
use crate::settle::headers::{arguments_table, short};
use crate::{Error, MissingObject};

/// Declares the topology, or with [`DeclareMode::Passive`] only checks it.
pub(crate) async fn establish_topology(
    connection: &Connection,
    topology: &Topology,
    mode: DeclareMode,
) -> Result<(), Error> {
    match mode {
        DeclareMode::Declare => declare_topology(connection, topology).await,
        DeclareMode::Passive => check_topology(connection, topology).await,
    }
}

/// Checks, declaring nothing, that every exchange and queue of a consumer's
/// topology exists (`declare = "passive"`): one passive declare per object,
/// each on a fresh channel because a failed one closes its channel. Fails
/// with [`Error::TopologyMissing`] listing **every** missing object.
///
/// A passive check sees only that an object exists: not the arguments of a
/// queue (its TTL, where it dead-letters to), nor the bindings. Those stay
/// the responsibility of whoever declared them.
pub async fn check_topology(connection: &Connection, topology: &Topology) -> Result<(), Error> {
    let mut missing = Vec::new();
    for exchange in topology.exchanges() {
        if !exchange_exists(connection, &exchange.name).await? {
            missing.push(MissingObject {
                object: "exchange",
                name: exchange.name.clone(),
            });
        }
    }
    for queue in topology.queues() {
        if inspect_queue(connection, &queue.name).await?.is_none() {
            missing.push(MissingObject {
                object: "queue",
                name: queue.name.clone(),
            });
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::TopologyMissing {
            queue: topology.work_queue.name.clone(),
            missing,
        })
    }
}

/// Declares a consumer's topology: its exchanges, queues and bindings, all
/// durable. Idempotent: declaring it again changes nothing.
///
/// Runs on a channel of its own, because the broker closes a channel on which a
/// declaration conflicts with an existing object; such a conflict comes back
/// as [`Error::TopologyConflict`], naming the object and the argument.
pub async fn declare_topology(connection: &Connection, topology: &Topology) -> Result<(), Error> {
    let channel = connection
        .create_channel()
        .await
        .map_err(|source| Error::Channel {
            action: "opening a channel to declare the topology",
            queue: topology.work_queue.name.clone(),
            source,
        })?;
    for exchange in topology.exchanges() {
        declare_exchange(&channel, exchange).await?;
    }
    for queue in topology.queues() {
        let arguments = arguments_table(&queue.arguments)?;
        channel
            .queue_declare(
                short(&queue.name, "queue name")?,
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .map_err(|e| declare_error("queue", &queue.name, e))?;
    }
    for binding in &topology.bindings {
        channel
            .queue_bind(
                short(&binding.queue, "queue name")?,
                short(&binding.exchange, "exchange name")?,
                short(&binding.routing_key, "routing key")?,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| {
                declare_error(
                    "binding",
                    &format!(
                        "{} → {} ({})",
                        binding.exchange, binding.queue, binding.routing_key
                    ),
                    e,
                )
            })?;
    }
    // Best effort: the declarations are done; a failing close changes nothing.
    let _ = channel.close(200, "topology declared".into()).await;
    Ok(())
}

async fn declare_exchange(channel: &lapin::Channel, exchange: &ExchangeDecl) -> Result<(), Error> {
    let kind = match exchange.kind {
        ExchangeKind::Direct => lapin::ExchangeKind::Direct,
        ExchangeKind::Fanout => lapin::ExchangeKind::Fanout,
        ExchangeKind::Topic => lapin::ExchangeKind::Topic,
        ExchangeKind::Headers => lapin::ExchangeKind::Headers,
    };
    channel
        .exchange_declare(
            short(&exchange.name, "exchange name")?,
            kind,
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| declare_error("exchange", &exchange.name, e))
}

/// Turns PRECONDITION_FAILED into a conflict that names the argument.
fn declare_error(object: &'static str, name: &str, source: lapin::Error) -> Error {
    if let ErrorKind::ProtocolError(amqp) = source.kind()
        && matches!(
            amqp.kind(),
            AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED)
        )
    {
        let detail = amqp.get_message().to_string();
        let argument = inequivalent_argument(&detail);
        let what = match &argument {
            Some(arg) => format!("argument '{arg}'"),
            None => "configuration".to_owned(),
        };
        return Error::TopologyConflict {
            object,
            name: name.to_owned(),
            argument,
            what,
            detail,
        };
    }
    Error::Declare {
        object,
        name: name.to_owned(),
        source,
    }
}

/// `x-message-ttl` from "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue …".
fn inequivalent_argument(detail: &str) -> Option<String> {
    let rest = detail.split_once("inequivalent arg '")?.1;
    Some(rest.split_once('\'')?.0.to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_argument_in_the_brokers_words() {
        let detail = "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received the value '5' of type 'long' but current is none";
        assert_eq!(
            super::inequivalent_argument(detail).as_deref(),
            Some("x-message-ttl")
        );
        assert_eq!(
            super::inequivalent_argument("PRECONDITION_FAILED - other"),
            None
        );
    }
}
