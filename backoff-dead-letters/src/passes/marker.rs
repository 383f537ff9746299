//! The marker protocol of a [pass](super::pass): the flag a rotation
//! raises in the marker queue (`<dead-letter queue>.pass`) and holds
//! unacknowledged while it runs, the flag a killed rotation left, and the
//! messages a pass marks its place with (its sentinel and its flag). The
//! module doc of `pass` says how they keep a rotation safe to kill.

use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use rabbit_backoff_core::{QueueDecl, headers::PASS_SENTINEL};

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{PERSISTENT, channel_error, confirm_channel};
use rabbit_backoff_runtime::transport::{
    Channel, Confirm, Connection, Delivery, NOT_FOUND, Publication, TransportError,
};

use super::pass_queue::{ack, marker_queue};

/// How long a pass that finds a marker queue without a ready flag waits for
/// the flag of a pass killed a moment ago to come back.
const FLAG_RETURN: Duration = Duration::from_secs(5);

/// A pass's flag in its marker queue, held unacknowledged on a channel of
/// its own, so that the multiple acks of the pass's channel never cover it:
/// it is ready again only if the pass dies.
pub(super) struct Flag {
    pub(super) channel: Arc<dyn Channel>,
    delivery: Delivery,
}

impl Flag {
    /// Acks the flag (the rotation is complete) and closes its channel.
    pub(super) async fn lower(self, marker: &str) -> Result<(), Error> {
        let acked = ack(&self.delivery, marker).await;
        drop(self.delivery);
        self.channel.close().await;
        acked
    }
}

/// The flag a killed rotation left ready in the marker queue, taken
/// (unacknowledged) on a channel of its own, if any.
pub(super) async fn stale_flag(
    connection: &dyn Connection,
    queue: &str,
) -> Result<Option<Flag>, Error> {
    let marker = marker_queue(queue);
    // The marker queue exists while a pass runs and after one was killed. A
    // killed pass's flag is ready again only once the broker has seen its
    // connection close, which can take a moment after the process died.
    let deadline = tokio::time::Instant::now() + FLAG_RETURN;
    // A passive check of a missing queue closes its channel: use one of its own.
    let probe = confirm_channel(connection, &marker).await?;
    let found = loop {
        match probe.check_queue(&marker).await {
            Ok(info) if info.messages == 0 && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            found => break found,
        }
    };
    match found {
        Ok(info) if info.messages > 0 => {}
        // A pass still running holds its flag (or one killed before raising
        // it left the queue empty): nothing to put right.
        Ok(_) => {
            probe.close().await;
            return Ok(None);
        }
        Err(e) if e.code() == Some(NOT_FOUND) => return Ok(None),
        Err(source) => {
            return Err(Error::Channel {
                action: "checking for an interrupted pass",
                queue: marker,
                source,
            });
        }
    }
    let flag = probe
        .get(&marker)
        .await
        .map_err(channel_error(&marker, "taking an interrupted pass's flag"));
    match flag {
        Ok(Some(delivery)) => Ok(Some(Flag {
            channel: probe,
            delivery,
        })),
        other => {
            probe.close().await;
            other.map(|_| None)
        }
    }
}

/// Declares the marker queue, publishes the pass's flag to it and takes it
/// back unacknowledged, on a channel of its own: ready again if the pass
/// dies.
pub(super) async fn raise_flag(
    connection: &dyn Connection,
    queue: &str,
    id: &str,
) -> Result<Flag, Error> {
    let marker = marker_queue(queue);
    let channel = confirm_channel(connection, &marker).await?;
    let flag = take_flag(&*channel, &marker, id).await;
    match flag {
        Ok(delivery) => Ok(Flag { channel, delivery }),
        Err(e) => {
            channel.close().await;
            Err(e)
        }
    }
}

/// Publishes the flag `id` to the marker queue (declared here) and takes it.
async fn take_flag(channel: &dyn Channel, marker: &str, id: &str) -> Result<Delivery, Error> {
    channel
        .declare_queue(&QueueDecl::new(marker))
        .await
        .map_err(channel_error(marker, "declaring the pass's marker queue"))?;
    publish_marker(channel, marker, marked(id, "flag")).await?;
    let flag = channel
        .get(marker)
        .await
        .map_err(channel_error(marker, "taking the pass's flag"))?
        .ok_or_else(|| Error::Channel {
            action: "taking the pass's flag",
            queue: marker.to_owned(),
            source: TransportError::Other("the flag was not there".into()),
        })?;
    Ok(flag)
}

/// The properties of a pass's sentinel or flag.
pub(super) fn marked(id: &str, what: &str) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from(PASS_SENTINEL),
        AMQPValue::LongString(LongString::from(id.as_bytes())),
    );
    BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_app_id(ShortString::from("rabbit-backoff"))
        .with_type(ShortString::from(what))
        .with_headers(headers)
}

/// Publishes a sentinel or flag to `queue`, confirmed.
pub(super) async fn publish_marker(
    channel: &dyn Channel,
    queue: &str,
    properties: BasicProperties,
) -> Result<(), Error> {
    let body: &[u8] = b"rabbit-backoff: a pass over a dead-letter queue is moving its messages \
                        to the back; it stops at this message and removes it.";
    let confirm = channel
        .publish(Publication::new("", queue, body, properties))
        .await
        .map_err(channel_error(queue, "publishing the pass's marker"))?;
    if confirm == Confirm::Ack {
        Ok(())
    } else {
        Err(Error::Channel {
            action: "publishing the pass's marker",
            queue: queue.to_owned(),
            source: TransportError::Other(format!("the broker did not take it ({confirm:?})")),
        })
    }
}
