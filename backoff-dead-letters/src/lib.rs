//! Operating the failures of [rabbit-backoff](https://docs.rs/rabbit-backoff)
//! consumers: what operators and their tools do, which services do not run.
//!
//! - [`Dlq`]: one consumer's dead-letter queue. Peek, group, replay (each
//!   copy confirmed before its original leaves), edit, discard, export,
//!   import and purge, in passes that keep every other message in its
//!   place, and the dead-letter index beside the queue that `groups` reads
//!   (over AMQP or RabbitMQ's stream protocol);
//! - [`Timeline`]: dead letters per group over time, for a chart;
//! - [`list_retry_tier`]: what waits in a retry tier, and when it is due;
//! - [`status`]: the depth and consumers of a consumer's queues.
//!
//! Services reach these through the facade's feature `dead-letters`
//! (`rabbit_backoff::dead_letters`, `rabbit_backoff::status`, …); the
//! `rabbit-backoff` command uses them. They are a crate of their own so that
//! a service compiles only what it runs: their dependencies (a regex engine,
//! base64, the stream protocol's codec, dates) stay out of its build. They
//! work through the runtime's [`toolkit`](rabbit_backoff_runtime::toolkit)
//! and its public [`transport`](rabbit_backoff_runtime::transport).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod dead_letters;
mod retry_tier;
mod status;

pub use dead_letters::checkpoint_note::CheckpointNote;
pub use dead_letters::dlq::{DEFAULT_INDEX_READERS, DEFAULT_STREAM_PORT, Dlq};
pub use dead_letters::edit::MessageEdit;
pub use dead_letters::export::ExportReport;
pub use dead_letters::filter::DeadLetterFilter;
pub use dead_letters::group::{DeadLetterGroup, GroupTally};
pub use dead_letters::group_report::{GroupReport, GroupSource};
pub use dead_letters::index_fallback::IndexFallback;
pub use dead_letters::index_protocol::IndexProtocol;
pub use dead_letters::message::{BODY_PREVIEW_LEN, DeadLetterMessage};
pub use dead_letters::pass_queue::is_marker_queue;
pub use dead_letters::purge::PurgeReport;
pub use dead_letters::record::{DeadLetterRecord, RecordError, RecordProperties, TypedValue};
pub use dead_letters::replay_options::ReplayOptions;
pub use dead_letters::report::{DeadLetterReport, SkippedMessage};
pub use dead_letters::timeline::{Chart, ChartSeries, Timeline};
pub use retry_tier::{TierListing, WaitingMessage, list_retry_tier};
pub use status::{ConsumerStatus, QueueStatus, status};
