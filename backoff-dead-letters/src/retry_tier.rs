//! Listing what waits in a consumer's retry tiers ([`list_retry_tier`]).

use std::time::Duration;

use rabbit_backoff_core::{HeaderValue, headers, parse_failed_at, read_retry_count};
use serde::Serialize;

use crate::message::BODY_PREVIEW_LEN;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{channel_error, confirm_channel, first_failed_at};
use rabbit_backoff_runtime::transport::{Connection, header_view};

/// A message waiting in a retry tier, and when it is due back in its work
/// queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct WaitingMessage {
    /// Its 0-based position in the tier (the head expires first).
    pub position: usize,
    /// The `message_id` property.
    pub message_id: Option<String>,
    /// `x-retry-count`: the tiers it has entered, this one included.
    pub retry_count: Option<u32>,
    /// When it first failed: `x-first-failed-at`, or on a first retry copy
    /// (which carries none) its `x-retried-at`.
    pub first_failed_at: Option<String>,
    /// `x-retried-at`: when this copy entered the tier. Copies published by
    /// versions of the framework before the header existed have none.
    pub entered_at: Option<String>,
    /// When it is due back in its work queue: `entered_at` plus the tier's
    /// delay (RFC 3339, UTC); unknown without `entered_at`.
    pub due_at: Option<String>,
    /// The body's length in bytes.
    pub body_len: usize,
    /// The first bytes of the body, as text (invalid UTF-8 replaced).
    pub body_preview: String,
}

/// The head of one retry tier.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TierListing {
    /// The retry queue.
    pub queue: String,
    /// Its delay (`x-message-ttl`), in milliseconds.
    pub delay_ms: u64,
    /// Messages ready in it when it was read.
    pub depth: u32,
    /// The first messages, in the order they become due.
    pub messages: Vec<WaitingMessage>,
}

/// The first `limit` messages of the retry queue `queue` (delay `delay_ms`),
/// each with the time it is due back in its work queue. They are taken
/// unacknowledged with `basic.get` and all returned to their places when
/// the channel closes, as a classic queue keeps them: a message due while it
/// is read expires a moment later, once it is back at the head.
///
/// A quorum queue puts returned messages at its back and counts every
/// return toward its delivery limit, so do not list quorum tiers this way.
pub async fn list_retry_tier(
    connection: &dyn Connection,
    queue: &str,
    delay_ms: u64,
    limit: usize,
) -> Result<TierListing, Error> {
    let channel = confirm_channel(connection, queue).await?;
    let depth = channel
        .check_queue(queue)
        .await
        .map_err(channel_error(queue, "finding the retry queue"))?
        .messages;
    let mut messages = Vec::new();
    let mut held = Vec::new();
    let outcome = async {
        while messages.len() < limit.min(depth as usize) {
            let Some(delivery) = channel
                .get(queue)
                .await
                .map_err(channel_error(queue, "reading the retry queue"))?
            else {
                break;
            };
            messages.push(waiting(&delivery, messages.len(), delay_ms));
            held.push(delivery);
        }
        Ok::<(), Error>(())
    }
    .await;
    // Closing the channel returns every message taken, in its place.
    channel.close().await;
    drop(held);
    outcome?;
    Ok(TierListing {
        queue: queue.to_owned(),
        delay_ms,
        depth,
        messages,
    })
}

fn waiting(
    delivery: &rabbit_backoff_runtime::transport::Delivery,
    position: usize,
    delay_ms: u64,
) -> WaitingMessage {
    let table = delivery.properties.headers().as_ref();
    let text = |name: &str| {
        table
            .and_then(|t| t.inner().get(name))
            .and_then(|v| match header_view(v) {
                HeaderValue::Str(s) => Some(s.to_owned()),
                _ => None,
            })
    };
    let entered_at = text(headers::RETRIED_AT);
    let due_at = entered_at
        .as_deref()
        .and_then(parse_failed_at)
        .map(|at| at + Duration::from_millis(delay_ms))
        .map(|due| humantime::format_rfc3339_millis(due).to_string());
    let preview_end = delivery.data.len().min(BODY_PREVIEW_LEN);
    WaitingMessage {
        position,
        message_id: delivery
            .properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string()),
        retry_count: table
            .and_then(|t| t.inner().get(headers::RETRY_COUNT))
            .map(|v| read_retry_count(Some(&header_view(v))).count),
        // A message waiting in a tier has not left it: no `x-death` of this
        // tier says when it entered.
        first_failed_at: first_failed_at(&delivery.properties),
        entered_at,
        due_at,
        body_len: delivery.data.len(),
        body_preview: String::from_utf8_lossy(&delivery.data[..preview_end]).into_owned(),
    }
}
