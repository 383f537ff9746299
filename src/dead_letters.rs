//! Operating dead letters: [`Dlq`] over one consumer's dead-letter queue
//! (peek, groups, replay, edit, discard, export, import, purge), its
//! filters, groups and reports, the dead-letter index it reads, and a
//! [`Timeline`] of failures per group
//! (feature `dead-letters`: the crate `rabbit-backoff-dead-letters`, which
//! a service that only consumes and publishes does not compile).

pub use rabbit_backoff_dead_letters::{
    BODY_PREVIEW_LEN, Chart, ChartSeries, CheckpointNote, DEFAULT_INDEX_READERS,
    DEFAULT_STREAM_PORT, DeadLetterFilter, DeadLetterGroup, DeadLetterMessage, DeadLetterRecord,
    DeadLetterReport, Dlq, ExportReport, GroupReport, GroupSource, GroupTally, IndexFallback,
    IndexProtocol, MessageEdit, PurgeReport, RecordError, RecordProperties, ReplayOptions,
    SkippedMessage, SourcedGroup, Timeline, TypedValue, is_marker_queue,
};
/// Replay jobs: a replay that sends a canary, watches its copies' fates and
/// stops itself when they fail again ([`Dlq::start_replay`]).
pub use rabbit_backoff_dead_letters::{
    CanaryReport, CanaryVerdict, ControlEntry, ErrorCount, ReplayControl, ReplayJob,
    ReplayJobError, ReplayJobState, ReplayJobStatus, ReplayOutcome, replay_meters,
};

/// Every consumer topology on a vhost, found through RabbitMQ's management
/// API, with the depths of its queues (feature `management`).
#[cfg(feature = "management")]
pub use rabbit_backoff_dead_letters::discovery;

/// RabbitMQ's management API: the queues, bindings and running nodes it
/// lists (feature `management`).
#[cfg(feature = "management")]
pub use rabbit_backoff_dead_letters::management;
