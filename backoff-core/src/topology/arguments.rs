//! Names of the queue arguments the framework declares.

/// Where the broker dead-letters a message (an exchange; `""` is the
/// default exchange).
pub const DEAD_LETTER_EXCHANGE: &str = "x-dead-letter-exchange";
/// The routing key of a dead-lettered message.
pub const DEAD_LETTER_ROUTING_KEY: &str = "x-dead-letter-routing-key";
/// How long a message waits in a retry queue, in milliseconds.
pub const MESSAGE_TTL: &str = "x-message-ttl";
/// `classic` or `quorum`.
pub const QUEUE_TYPE: &str = "x-queue-type";
/// A quorum queue's delivery limit.
pub const DELIVERY_LIMIT: &str = "x-delivery-limit";
/// `at-least-once` dead-lettering of a quorum queue.
pub const DEAD_LETTER_STRATEGY: &str = "x-dead-letter-strategy";
/// What a full queue does with a new message.
pub const OVERFLOW: &str = "x-overflow";
/// The most bytes a stream keeps: past it, its oldest segments go.
pub const MAX_LENGTH_BYTES: &str = "x-max-length-bytes";
/// The size of a stream's segment files, the unit its retention drops.
pub const STREAM_MAX_SEGMENT_SIZE_BYTES: &str = "x-stream-max-segment-size-bytes";
/// The `x-queue-type` of a stream.
pub const STREAM: &str = "stream";
/// How long a stream keeps a segment once it is full (`7D`, `12h`).
pub const MAX_AGE: &str = "x-max-age";
