//! Reading one stream of the dead-letter index up to an end marker: a
//! message published straight to the stream with a unique id, so that a
//! read knows where the stream ended when it began, whatever arrives after.

use std::fmt::Display;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use rabbit_backoff_core::HeaderValue;
use rabbit_backoff_core::headers::INDEX_MARKER;

use crate::index::index_fallback::IndexFallback;
use crate::run_id::run_id;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::confirm_channel;
use rabbit_backoff_runtime::transport::{
    Channel, Confirm, Connection, Deliveries, Delivery, Publication, StreamOffset, header_view,
};

/// Deliveries a stream consumer of the index may hold unacknowledged.
const PREFETCH: u16 = 5000;

/// Deliveries acknowledged together (for a stream, an ack only asks for more).
const ACK_EVERY: usize = 1000;

/// How long a read waits for the next message before its end marker.
const IDLE: Duration = Duration::from_secs(30);

/// The header a broker adds to each message it delivers from a stream.
pub(crate) const STREAM_OFFSET: &str = "x-stream-offset";

/// An [`IndexFallback::Unreadable`] for a transport error.
pub(crate) fn unreadable(e: Error) -> IndexFallback {
    IndexFallback::Unreadable {
        reason: e.to_string(),
    }
}

/// Publishes the end marker `id` straight to `stream`, confirmed.
pub(crate) async fn mark_end(
    channel: &dyn Channel,
    stream: &str,
    id: &str,
) -> Result<(), IndexFallback> {
    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from(INDEX_MARKER),
        AMQPValue::LongString(LongString::from(id.as_bytes())),
    );
    let confirm = channel
        .publish(Publication::new(
            "",
            stream,
            b"",
            BasicProperties::default().with_headers(headers),
        ))
        .await
        .map_err(|e| IndexFallback::Unreadable {
            reason: format!("marking the end of '{stream}': {e}"),
        })?;
    match confirm {
        Confirm::Ack => Ok(()),
        Confirm::Returned => Err(IndexFallback::Absent),
        Confirm::Nack => Err(IndexFallback::Unreadable {
            reason: format!("'{stream}' did not take the end marker (Nack)"),
        }),
    }
}

/// Where a read of a stream stops.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Until<'a> {
    /// At the end marker with this id.
    Marker(&'a str),
    /// At the first message at this offset or past it (not read).
    Offset(u64),
}

/// Reads `stream` up to the marker `id`, from its first message or, with
/// `after`, from the message after that offset, calling `each` with every
/// message but the markers; the marker's offset.
pub(crate) async fn read_to_marker(
    channel: &dyn Channel,
    stream: &str,
    after: Option<u64>,
    id: &str,
    each: impl FnMut(&Delivery),
) -> Result<u64, IndexFallback> {
    read_until(channel, stream, after, Until::Marker(id), each).await
}

/// Reads `stream` from its first message or, with `after`, from the
/// message after that offset, until `until`, calling `each` with every
/// message but the markers; the offset it stopped at.
pub(crate) async fn read_until(
    channel: &dyn Channel,
    stream: &str,
    after: Option<u64>,
    until: Until<'_>,
    mut each: impl FnMut(&Delivery),
) -> Result<u64, IndexFallback> {
    let failed = |what: &str, e: &dyn Display| stream_error(what, stream, e);
    let from = match after {
        None => StreamOffset::First,
        Some(offset) => StreamOffset::At(offset.saturating_add(1)),
    };
    let mut deliveries = attach(channel, stream, from).await?;
    let mut unacked = 0;
    let end = loop {
        let delivery = next_of(
            &mut deliveries,
            stream,
            "nothing came from it",
            "before its end",
        )
        .await?;
        unacked += 1;
        let marker = marker_of(&delivery.properties);
        let offset = offset_of(&delivery.properties);
        if let (Until::Offset(end), Some(offset)) = (until, offset)
            && offset >= end
        {
            break offset;
        }
        if unacked >= ACK_EVERY || marker.is_some() {
            delivery
                .acker
                .ack_multiple()
                .await
                .map_err(|e| failed("acknowledging", &e))?;
            unacked = 0;
        }
        // The broker starts at the chunk that holds the offset asked for.
        if let (Some(after), Some(offset)) = (after, offset)
            && offset <= after
        {
            continue;
        }
        match (marker, until) {
            (Some(seen), Until::Marker(id)) if seen == id.as_bytes() => {
                break offset.ok_or_else(|| {
                    failed(
                        "reading",
                        &"the end marker came without its x-stream-offset",
                    )
                })?;
            }
            (Some(_), _) => {}
            (None, Until::Offset(_)) if offset.is_none() => {
                return Err(failed(
                    "reading",
                    &"a message came without its x-stream-offset",
                ));
            }
            (None, _) => each(&delivery),
        }
    };
    let _ = channel.cancel(&deliveries.consumer_tag).await;
    Ok(end)
}

/// The offset of the next message written to `stream` less one: the offset
/// of a marker published now, which every later message follows. Read by
/// attaching at the stream's end, then publishing the marker.
pub(crate) async fn offset_now(
    connection: &dyn Connection,
    stream: &str,
) -> Result<u64, IndexFallback> {
    let channel = confirm_channel(connection, stream)
        .await
        .map_err(unreadable)?;
    let result = async {
        let mut deliveries = attach(&*channel, stream, StreamOffset::Next).await?;
        let id = run_id();
        mark_end(&*channel, stream, &id).await?;
        loop {
            let delivery = next_of(
                &mut deliveries,
                stream,
                "the marker published to it did not come back",
                "",
            )
            .await?;
            let _ = delivery.acker.ack_multiple().await;
            if marker_of(&delivery.properties) == Some(id.as_bytes()) {
                let _ = channel.cancel(&deliveries.consumer_tag).await;
                return offset_of(&delivery.properties).ok_or_else(|| {
                    stream_error(
                        "reading",
                        stream,
                        &"the marker came without its x-stream-offset",
                    )
                });
            }
        }
    }
    .await;
    channel.close().await;
    result
}

/// Attaches to `stream` at `from`, [`PREFETCH`] messages at a time.
async fn attach(
    channel: &dyn Channel,
    stream: &str,
    from: StreamOffset,
) -> Result<Deliveries, IndexFallback> {
    channel
        .qos(PREFETCH)
        .await
        .map_err(|e| stream_error("setting the prefetch of", stream, &e))?;
    channel
        .consume_stream(stream, from)
        .await
        .map_err(|e| stream_error("reading", stream, &e))
}

/// `stream` is unreadable: `e` happened while `what` (`reading`, …) it.
fn stream_error(what: &str, stream: &str, e: &dyn Display) -> IndexFallback {
    IndexFallback::Unreadable {
        reason: format!("{what} '{stream}': {e}"),
    }
}

/// The next delivery read from `stream`; when none comes for [`IDLE`], the
/// stream is unreadable because `idle` (`… in N s` and `then` follow it).
async fn next_of(
    deliveries: &mut Deliveries,
    stream: &str,
    idle: &str,
    then: &str,
) -> Result<Delivery, IndexFallback> {
    let failed = |e: &dyn Display| stream_error("reading", stream, e);
    match tokio::time::timeout(IDLE, deliveries.stream.next()).await {
        Err(_) => Err(IndexFallback::Unreadable {
            reason: format!("'{stream}': {idle} in {} s {then}", IDLE.as_secs())
                .trim_end()
                .to_owned(),
        }),
        Ok(None) => Err(failed(&"the consumer was cancelled")),
        Ok(Some(Err(e))) => Err(failed(&e)),
        Ok(Some(Ok(delivery))) => Ok(delivery),
    }
}

pub(crate) fn marker_of(properties: &BasicProperties) -> Option<&[u8]> {
    match properties.headers().as_ref()?.inner().get(INDEX_MARKER)? {
        AMQPValue::LongString(id) => Some(id.as_bytes()),
        AMQPValue::ShortString(id) => Some(id.as_str().as_bytes()),
        AMQPValue::ByteArray(id) => Some(id.as_slice()),
        _ => Some(b""),
    }
}

/// The offset the broker gave a message it delivered from a stream.
pub(crate) fn offset_of(properties: &BasicProperties) -> Option<u64> {
    match header_view(properties.headers().as_ref()?.inner().get(STREAM_OFFSET)?) {
        HeaderValue::Int(offset) => u64::try_from(offset).ok(),
        _ => None,
    }
}
