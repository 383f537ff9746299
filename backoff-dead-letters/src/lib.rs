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
//! - [`status`]: the depth and consumers of a consumer's queues;
//! - with the feature `management`, `discovery`: every consumer topology
//!   on a vhost, found through RabbitMQ's management API (`management`, an
//!   HTTP client), for the command and the web console.
//!
//! Services reach these through the facade's feature `dead-letters`
//! (`rabbit_backoff::dead_letters`, `rabbit_backoff::status`, …); the
//! `rabbit-backoff` command uses them. They are a crate of their own so that
//! a service compiles only what it runs: their dependencies (a regex engine,
//! base64, the stream protocol's codec, dates) stay out of its build. They
//! work through the runtime's [`toolkit`](rabbit_backoff_runtime::toolkit)
//! and its public [`transport`](rabbit_backoff_runtime::transport).
//!
//! The modules: at the root, the model (messages, filters, groups, keys,
//! records, reports, the timeline) and [`Dlq`] itself, the status and
//! retry tiers of a consumer, and its discovery; `index/`, the
//! dead-letter index and its read; `passes/`, the passes over the queue and
//! the operations made of them; `replay_job/`, replays that watch their
//! copies' fates and stop themselves.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "management")]
pub mod discovery;
mod dlq;
mod filter;
mod filter_record;
mod group;
mod group_report;
mod index;
mod key;
#[cfg(feature = "management")]
pub mod management;
mod message;
mod passes;
mod record;
mod replay_job;
mod retry_tier;
mod run_id;
mod sourced_group;
mod status;
mod timeline;

pub use dlq::{DEFAULT_INDEX_READERS, DEFAULT_STREAM_PORT, Dlq};
pub use filter::DeadLetterFilter;
pub use group::{DeadLetterGroup, GroupTally};
pub use group_report::{GroupReport, GroupSource};
pub use index::checkpoint_note::CheckpointNote;
pub use index::index_fallback::IndexFallback;
pub use index::index_protocol::IndexProtocol;
pub use message::{BODY_PREVIEW_LEN, DeadLetterMessage};
pub use passes::edit::MessageEdit;
pub use passes::export::ExportReport;
pub use passes::pass_queue::is_marker_queue;
pub use passes::purge::PurgeReport;
pub use passes::replay_options::ReplayOptions;
pub use passes::report::{DeadLetterReport, SkippedMessage};
pub use rabbit_backoff_core::{FateCounts, PlanError, ReplayPlan, parse_threshold};
pub use record::{DeadLetterRecord, RecordError, RecordProperties, TypedValue};
pub use replay_job::job_book::{
    CanaryReport, ControlEntry, ErrorCount, ReplayJobState, ReplayJobStatus,
};
pub use replay_job::job_driver::ReplayJob;
/// The names of a replay job's metrics.
pub mod replay_meters {
    pub use crate::replay_job::job_meters::{
        REPLAY_FAILING, REPLAY_HANDLED, REPLAY_JOBS, REPLAY_PAUSED, REPLAY_RUNNING, REPLAY_SENT,
        REPLAY_WAITING,
    };
}
pub use replay_job::replay_job_error::ReplayJobError;
pub use replay_job::replay_record::{CanaryVerdict, ReplayControl, ReplayOutcome};
pub use retry_tier::{TierListing, WaitingMessage, list_retry_tier};
pub use sourced_group::SourcedGroup;
pub use status::{ConsumerStatus, QueueStatus, status};
pub use timeline::{Chart, ChartSeries, Timeline};
