//! Names of the headers the framework reads and writes.

/// How many retry tiers the message has been through (an integer).
pub const RETRY_COUNT: &str = "x-retry-count";
/// Why the message failed: the handler error's `Display`, bounded in size.
pub const ERROR: &str = "x-error";
/// When the message was dead-lettered, RFC 3339 in UTC.
pub const FAILED_AT: &str = "x-failed-at";
/// Why the message was dead-lettered: `permanent`, `exhausted`, `decode`,
/// `oversized` or `expired`.
pub const DEAD_LETTER_REASON: &str = "x-dead-letter-reason";
/// The work queue the message failed in.
pub const ORIGINAL_QUEUE: &str = "x-original-queue";
/// The exchange of the delivery that failed.
pub const ORIGINAL_EXCHANGE: &str = "x-original-exchange";
/// The routing key of the delivery that failed.
pub const ORIGINAL_ROUTING_KEY: &str = "x-original-routing-key";
/// The failures of earlier replays: an array of tables, oldest first, each
/// holding the failure headers of one replay and `x-replayed-at`. At most
/// [`REPLAY_HISTORY_LIMIT`](crate::REPLAY_HISTORY_LIMIT) entries are kept.
pub const REPLAY_HISTORY: &str = "x-replay-history";
/// When the message was last replayed, RFC 3339 in UTC.
pub const REPLAYED_AT: &str = "x-replayed-at";
/// How many times the message was replayed in all, including the replays
/// whose history entries were dropped.
pub const REPLAY_COUNT: &str = "x-replay-count";
/// The user headers a dead-letter copy had to leave out to fit in one frame,
/// each as `name (N bytes)`.
pub const DROPPED_HEADERS: &str = "x-dropped-headers";
/// When the message first failed, RFC 3339 in UTC, for `max_age`: set on
/// the second retry copy, or a dead letter of the first, and kept on every
/// later one. A first retry copy does not carry it: its `x-retried-at`
/// (stamped only for a consumer with a `max_age`), or the broker's `x-death`
/// when it leaves its tier, says it. A message dead-lettered at its first
/// failure does not carry it either: its `x-failed-at` says the same.
pub const FIRST_FAILED_AT: &str = "x-first-failed-at";
/// When a retry copy was published to its retry tier, RFC 3339 in UTC: the
/// tier's delay counts from then, so the copy is due back in its work queue
/// at this time plus the tier's delay. Rewritten on every retry from the
/// second; a first retry copy carries it only for a consumer with a
/// `max_age`.
pub const RETRIED_AT: &str = "x-retried-at";
/// In an `x-replay-history` entry: who replayed the message (the name of the
/// console token that asked for it).
pub const REPLAYED_BY: &str = "x-replayed-by";
/// In an `x-replay-history` entry of a message edited before its replay: its
/// body before the edit.
pub const ORIGINAL_BODY: &str = "x-original-body";
/// In an `x-replay-history` entry of a message edited before its replay: the
/// user headers the edit changed or removed, with their values before it.
pub const ORIGINAL_HEADERS: &str = "x-original-headers";
/// On a copy a replay job sent: the job's id. The consumer records what
/// became of each delivery that carries it (its fate) in the replay log of
/// its dead-letter queue, and keeps it on the retry copies it makes, so the
/// job follows the copy until it is handled or dead-lettered again.
pub const REPLAY_JOB: &str = "x-replay-job";
/// On a copy a replay job sent: the copy's number in its job (an integer).
pub const REPLAY_SEQ: &str = "x-replay-seq";
/// Marks the end of a pass over a dead-letter queue: when the operator
/// tools have to move messages to the back of the queue to read past a
/// bounded window, they first put one message with this header behind the
/// last dead letter, and stop when it comes round. Its value is the pass's
/// id.
pub const PASS_SENTINEL: &str = "x-rabbit-backoff-pass";
/// Marks the end of a read of the dead-letter index: `dlq groups` publishes
/// one message with this header (its value the read's id) to each index
/// stream, and reads up to it. Readers skip every message that has it.
pub const INDEX_MARKER: &str = "x-rabbit-backoff-index-marker";
/// Marks a part of a checkpoint of the dead-letter index in its tombstone
/// stream: what a pass (or a purge) saw in the dead-letter queue, per group,
/// which stands for every entry before an offset of the entries' stream.
/// Its value is the checkpoint's format (`1`); readers that do not know it
/// take the body for tombstones, whose keys then match no entry.
pub const INDEX_CHECKPOINT: &str = "x-rabbit-backoff-index-checkpoint";
/// The layout of a tombstone message's body when it is not 8-byte keys:
/// `key+group`, 16 bytes a removal (the key, then the dead letter's group
/// id, both big-endian), so that a removal can be taken from a
/// checkpoint's groups.
pub const TOMBSTONE_LAYOUT: &str = "x-rabbit-backoff-tombstone-layout";
/// Stands for headers that nest deeper than
/// [`MAX_HEADER_DEPTH`](crate::MAX_HEADER_DEPTH): the runtime's connection
/// hands a delivery whose headers nest that deep to lapin with this one
/// header instead, a byte array holding the original headers
/// [packed](crate::deep_headers) (and puts the original back when such a
/// table is published again on it). A consumer rejects such a delivery
/// without requeue, so the broker dead-letters its untouched original.
pub const DEEP_HEADERS: &str = "x-rabbit-backoff-deep-headers";

/// The broker's record of a message's dead-letterings (RabbitMQ's own
/// header, not one the framework writes): one table per queue and reason,
/// newest first.
pub const DEATH: &str = "x-death";

/// Where the failed delivery came from: `x-original-queue`, `-exchange`,
/// `-routing-key`.
pub const ORIGINAL: [&str; 3] = [ORIGINAL_QUEUE, ORIGINAL_EXCHANGE, ORIGINAL_ROUTING_KEY];

/// Every header the framework writes; all others are the user's (or the
/// broker's, such as `x-death`).
pub const FRAMEWORK: [&str; 15] = [
    RETRY_COUNT,
    ERROR,
    FAILED_AT,
    FIRST_FAILED_AT,
    DEAD_LETTER_REASON,
    ORIGINAL_QUEUE,
    ORIGINAL_EXCHANGE,
    ORIGINAL_ROUTING_KEY,
    REPLAY_HISTORY,
    REPLAYED_AT,
    REPLAY_COUNT,
    DROPPED_HEADERS,
    RETRIED_AT,
    REPLAY_JOB,
    REPLAY_SEQ,
];
