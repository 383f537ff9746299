//! Declaring a consumer's topology, or checking that it exists.

use rabbit_backoff_core::{Binding, DeadLetterIndexDecl, DeclareMode, Topology};

use super::inspect::{exchange_exists, inspect_queue};
use crate::error::{Error, MissingObject, channel_error};
use crate::transport::{Channel, Connection, PRECONDITION_FAILED, TransportError};

/// Declares the topology, or with [`DeclareMode::Passive`] only checks it.
pub(crate) async fn establish_topology(
    connection: &dyn Connection,
    topology: &Topology,
    mode: DeclareMode,
) -> Result<(), Error> {
    match mode {
        DeclareMode::Declare => declare_topology(connection, topology).await,
        DeclareMode::Passive => check_topology(connection, topology).await,
        // Not reached with the core pinned exactly (`=0.1.0`);
        // `DeclareMode` is `#[non_exhaustive]` for services, so Rust wants
        // this arm: it declares nothing, and only checks.
        _ => check_topology(connection, topology).await,
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
pub async fn check_topology(connection: &dyn Connection, topology: &Topology) -> Result<(), Error> {
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
/// durable. The dead-letter index is declared by the
/// [`Runtime`](crate::Runtime) that writes it, on a connection of its own
/// ([`IndexFeed::Written`](rabbit_backoff_core::IndexFeed::Written)), and
/// deleted here when the consumer turned it off. Idempotent: declaring it
/// again changes nothing.
///
/// Runs on a channel of its own, because the broker closes a channel on which a
/// declaration conflicts with an existing object; such a conflict comes back
/// as [`Error::TopologyConflict`], naming the object and the argument.
pub async fn declare_topology(
    connection: &dyn Connection,
    topology: &Topology,
) -> Result<(), Error> {
    let channel = connection.open_channel().await.map_err(channel_error(
        &topology.work_queue.name,
        "opening a channel to declare the topology",
    ))?;
    for exchange in topology.exchanges() {
        channel
            .declare_exchange(&exchange.name, exchange.kind)
            .await
            .map_err(|e| declare_error("exchange", &exchange.name, e))?;
    }
    for queue in topology.queues() {
        channel
            .declare_queue(queue)
            .await
            .map_err(|e| declare_error("queue", &queue.name, e))?;
    }
    for binding in &topology.bindings {
        bind(channel.as_ref(), binding).await?;
    }
    // Best effort: the declarations are done; a failing close changes nothing.
    channel.close().await;
    // With the index on, the runtime's index writer declares it, on a
    // connection of its own: declaring a stream waits on the stream
    // coordinator, which a consumer's start must not.
    if topology.index_feed().is_none() {
        delete_index(connection, &topology.dead_letter_index).await;
    }
    Ok(())
}

/// Deletes the dead-letter index an earlier declaration left, when the
/// consumer now has none (`dead_letter_index = "off"`): the broker stops
/// writing each dead letter to it, and `dlq groups` no longer finds a
/// summary that stopped following the queue. Best effort: the index is a
/// second record of the dead-letter queue, which keeps every dead letter.
async fn delete_index(connection: &dyn Connection, index: &DeadLetterIndexDecl) {
    let deleted = async {
        let channel = connection.open_channel().await?;
        let mut result = Ok(());
        for stream in index.queues() {
            result = result.and(channel.delete_queue(&stream.name).await);
        }
        channel.close().await;
        result
    }
    .await;
    match deleted {
        Ok(()) => tracing::debug!(
            "no dead-letter index (dead_letter_index = \"off\"): {} deleted if it was there",
            index.entries.name
        ),
        Err(e) => tracing::warn!(
            "the dead-letter index {} is off but could not be deleted ({e}); delete it to stop \
             the broker writing each dead letter to it",
            index.entries.name
        ),
    }
}

/// Binds `binding`'s queue to its exchange; a refusal names both and the key.
async fn bind(channel: &dyn Channel, binding: &Binding) -> Result<(), Error> {
    channel.bind_queue(binding).await.map_err(|e| {
        declare_error(
            "binding",
            &format!(
                "{} → {} ({})",
                binding.exchange, binding.queue, binding.routing_key
            ),
            e,
        )
    })
}

/// Turns PRECONDITION_FAILED into a conflict that names the argument.
fn declare_error(object: &'static str, name: &str, source: TransportError) -> Error {
    if let TransportError::Refused {
        code: PRECONDITION_FAILED,
        text,
    } = &source
    {
        let detail = text.clone();
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
