//! What operator tools built beside the runtime use from its inside: not
//! for services.
//!
//! The dead-letter operations, the retry tiers' listing and the status of a
//! consumer's queues live in a crate of their own, so that a service
//! compiles only what it runs. They work as the runtime does, on the same
//! broker requests and the same copies: a confirm channel per queue, a
//! passive look at a queue, the frame guard's set-aside headers, confirmed
//! copies that fit a frame, trace context. (The framework's clock, which
//! they share with the in-memory broker, is [`clock`](crate::clock).) This
//! module is the runtime's side of that seam, and nothing else in the
//! runtime uses it: it sits on top of the layers.
//!
//! The transport's types they need ([`Connection`], [`Channel`],
//! [`Delivery`](crate::transport::Delivery), …) are public in
//! [`transport`](crate::transport) already; what is here is otherwise
//! private to the runtime.

use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff_core::{EntryValue, IndexEntry};

use crate::error::{Error, PublishFailure};
use crate::settle::first_failure::TierDelays;
use crate::settle::settlement::Settler;
use crate::transport::frame_guard::SetAside;
use crate::transport::{Channel, Connection, TransportError};

pub use crate::settle::settlement::Target;
pub use crate::settle::shrink_copy::TooLarge;

/// `delivery_mode` of a persistent message: what the framework publishes
/// with.
pub const PERSISTENT: u8 = crate::transport::amqp_values::PERSISTENT;

/// A new channel on `connection` in confirm mode, for work on `queue`; an
/// error names the queue ([`Error::Channel`]).
pub async fn confirm_channel(
    connection: &dyn Connection,
    queue: &str,
) -> Result<Arc<dyn Channel>, Error> {
    crate::broker::confirm_channel::confirm_channel(connection, queue).await
}

/// The ready messages and consumers of the queue `name`, or `None` when it
/// does not exist: a passive declare, on a channel of its own (a missing
/// queue closes the channel it is asked on).
pub async fn inspect_queue(
    connection: &dyn Connection,
    name: &str,
) -> Result<Option<(u32, u32)>, Error> {
    crate::broker::inspect::inspect_queue(connection, name).await
}

/// Turns a transport error met while doing `action` for `queue` into the
/// runtime's [`Error::Channel`]: `.map_err(channel_error(queue, "…"))`.
pub fn channel_error(queue: &str, action: &'static str) -> impl FnOnce(TransportError) -> Error {
    crate::error::channel_error(queue, action)
}

/// The packed form of headers the runtime's connection set aside because
/// they nest deeper than [`MAX_HEADER_DEPTH`](rabbit_backoff_core::MAX_HEADER_DEPTH)
/// (read them with [`deep_headers`](rabbit_backoff_core::deep_headers)), or
/// `None` for headers as the broker delivered them.
pub fn packed_headers(properties: &BasicProperties) -> Option<&[u8]> {
    crate::transport::frame_guard::packed_headers(properties)
}

/// Why no copy of a message can be published, when its headers were set
/// aside (see [`packed_headers`]): how deep they nest and how large they
/// are, or that they are not a well-formed table. `None` for headers as the
/// broker delivered them.
pub fn set_aside_reason(properties: &BasicProperties) -> Option<String> {
    SetAside::of(properties).map(|set_aside| set_aside.to_string())
}

/// Links `span` to the trace whose context `headers` carry (a replay to its
/// failure), through OpenTelemetry's global propagator.
pub fn link_trace(span: &tracing::Span, headers: Option<&FieldTable>) {
    crate::telemetry::trace_context::link_trace(span, headers);
}

pub use crate::settle::copy_properties::republish_properties;
pub use crate::settle::replay_marker::replay_marker;

/// When the message of `properties` first failed, as text: its
/// `x-first-failed-at`, or on a first retry copy (which carries none) its
/// `x-retried-at`. `None` before any failure, or when nothing says it.
pub fn first_failed_at(properties: &BasicProperties) -> Option<String> {
    crate::settle::first_failure::first_failed_at(properties, &TierDelays::default())
        .and_then(|first| first.to_text())
}

/// The entry of the dead-letter index for a dead letter published with
/// `properties` and a body of `body_len` bytes, as the consumer's index
/// writer makes it, for an operator tool that puts dead letters in the
/// queue itself (`dlq import`); `None` for headers set aside (see
/// [`packed_headers`]), which get no entry.
pub fn index_entry(properties: &BasicProperties, body_len: usize) -> Option<IndexEntry> {
    crate::broker::index_entry::index_entry(properties, body_len)
}

/// The header value that a value kept by an index entry stands for (as
/// [`index_entry`] keeps it), for a reader of the index; `None` for bytes
/// that are none.
pub fn entry_header_value(value: &EntryValue) -> Option<AMQPValue> {
    crate::broker::index_entry::header_value(value)
}

/// The most entries the consumer's index writer puts in one stream message
/// ([`IndexBatch`](rabbit_backoff_core::IndexBatch)).
pub const INDEX_BATCH_ENTRIES: usize = crate::broker::index_writer::BATCH;

/// Publishes copies of deliveries as a consumer's decisions do: confirmed,
/// each fitted into a frame first, on a channel that is replaced when the
/// broker refuses a copy (RabbitMQ 3.10 can go on refusing a quorum queue's
/// copies on a channel that published to it while its leader moved).
pub struct CopyPublisher {
    settler: Settler,
}

impl CopyPublisher {
    /// Opens a confirm channel on `connection` for copies of `queue`'s
    /// messages; each copy waits at most `confirm_timeout` for its confirm.
    pub async fn open(
        connection: Arc<dyn Connection>,
        queue: &str,
        confirm_timeout: Duration,
    ) -> Result<Self, Error> {
        let channel = confirm_channel(&*connection, queue).await?;
        Ok(CopyPublisher {
            settler: Settler::new(channel, connection, confirm_timeout),
        })
    }

    /// The connection's negotiated frame size.
    pub fn frame_max(&self) -> u32 {
        self.settler.frame_max()
    }

    /// `properties` as a copy to `target` can carry them: unchanged when
    /// they fit, else shrunk by the core's plan (the largest of the user's
    /// headers left out, `x-error` cut), or [`TooLarge`] when nothing fits.
    pub fn fit(
        &self,
        properties: BasicProperties,
        target: &Target<'_>,
    ) -> Result<BasicProperties, TooLarge> {
        self.settler.fit(properties, target)
    }

    /// Publishes a copy to `target`, in a `publish` span whose trace context
    /// the copy carries, and waits for the broker's confirm.
    pub async fn publish(
        &self,
        target: &Target<'_>,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), PublishFailure> {
        self.settler.publish(target, body, properties).await
    }

    /// Closes its channels.
    pub async fn close(&self) {
        self.settler.close().await;
    }
}
