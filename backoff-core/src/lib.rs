//! Pure logic of [rabbit-backoff](https://docs.rs/rabbit-backoff): everything the
//! framework decides, with no I/O and no async runtime.
//!
//! - [`Delays`]: the retry schedule, parsed from `"5s,15s,60s"`;
//! - [`ConsumerSpec`] and [`Topology`]: which exchanges, queues and bindings a
//!   consumer needs, with their names and arguments;
//! - [`read_retry_count`]: the tolerant reading of the `x-retry-count` header;
//! - [`decide`]: what to do with one delivery after its handler ran;
//! - [`DeadLetter`]: the headers a dead-lettered message carries;
//! - [`Classify`]: how an error type says whether retrying can help.
//!
//! The runtime only executes these decisions against the broker, so every rule
//! here is unit-tested without one.
//!
//! ```
//! use rabbit_backoff::Delays;
//! use rabbit_backoff::rules::{decide, Attempt, Decision, Outcome, Policy, Verdict};
//!
//! let delays: Delays = "5s,15s,60s".parse()?;
//! let failed = Outcome::Failed { verdict: Verdict::Retry, error: "db down".into() };
//! assert_eq!(
//!     decide(Policy::new(&delays), Attempt::count(0), &failed),
//!     Decision::Retry { delay_ms: 5_000, next_count: 1 }
//! );
//! # Ok::<(), rabbit_backoff::DelayError>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod annotations;
mod attribute_keys;
mod breaker;
mod broker_release;
mod classic_on_cluster;
mod classify;
mod consumer_spec;
mod dead_letter;
mod dead_letter_index;
mod decision;
mod dedupe;
pub mod deep_headers;
mod definitions;
mod delays;
mod discovery;
mod failed_at;
mod fingerprint;
mod header_value;
pub mod headers;
mod index_batch;
mod index_entry;
mod index_feed;
mod index_key;
mod jitter;
mod metadata_watch;
mod names;
mod offset_ranges;
mod packed_entry;
mod reconnect;
mod reconnect_probe;
mod replay;
mod replay_job;
mod retry_backend;
mod retry_count;
mod return_watch;
mod serde_str;
mod shrink_plan;
mod tombstone_ledger;
mod topology;

pub use attribute_keys::ATTRIBUTE_KEYS;
pub use breaker::{Breaker, BreakerAction, BreakerSpec, BreakerState};
pub use broker_release::{BrokerRelease, HeldRetries};
pub use classic_on_cluster::{ClassicOnCluster, ClusterEvidence};
pub use classify::{Classify, ErrorClass, Verdict};
pub use consumer_spec::{
    ConsumerSpec, DeclareMode, ExchangeKind, QueueType, RetryReturn, SpecError,
};
pub use dead_letter::{
    DeadLetter, DeadLetterReason, MAX_ERROR_LEN, truncate_error, truncate_error_to,
};
pub use dead_letter_index::DeadLetterIndex;
pub use decision::{Attempt, Decision, Outcome, Policy, decide};
pub use dedupe::{Dedupe, DedupeKey, KeyFate, inbox_key, outbox_message_id};
pub use definitions::{BindingDefinition, Definitions, ExchangeDefinition, QueueDefinition};
pub use delays::{DelayError, Delays, MAX_DELAY_MS, MAX_TIERS, parse_duration};
pub use discovery::{BindingListing, FoundTopology, QueueListing, discover};
pub use failed_at::parse_failed_at;
pub use fingerprint::{fingerprint, group_id};
pub use header_value::HeaderValue;
pub use headers::{REPLAY_HISTORY, REPLAYED_AT};
pub use index_batch::{BatchError, IndexBatch};
pub use index_entry::{ENTRY_HEADERS, EntryValue, IndexEntry};
pub use index_feed::IndexFeed;
pub use index_key::index_key;
pub use jitter::{Jitter, MAX_JITTER_PERCENT, SUB_QUEUES};
pub use metadata_watch::{MetadataProbe, MetadataWatch, MissCounter, WatchVerdict, connect_order};
pub use names::{NameError, NameOverrides, TopologyNames, validate_name};
pub use offset_ranges::split_offsets;
pub use packed_entry::{PackedEntry, PackedEntryBuilder};
pub use reconnect::ReconnectBackoff;
pub use reconnect_probe::{MIN_PROBE_INTERVAL, ReconnectProbe};
pub use replay::{FAILURE_HEADERS, REPLAY_HISTORY_LIMIT, history_overflow, replay_target};
pub use replay_job::{
    Fate, FateBatch, FateCounts, FateTally, MAX_CANARY, PlanError, REPLAY_LOG_MAX_AGE,
    REPLAY_LOG_MAX_BYTES, ReplayFate, ReplayPlan, ReplayVerdict, parse_rate, parse_threshold,
    replay_log_decl,
};
pub use retry_backend::{DelayedRetry, NotLinear, RetryBackend, delayed_arguments};
pub use retry_count::{RetryCount, RetryCountWarning, read_retry_count};
pub use return_watch::{NodeProbe, ProbeVerdict, ReturnWatch};
pub use shrink_plan::{
    CopySizes, DEAD_LETTER_HEADROOM, FRAME_OVERHEAD, Fit, MAX_HEADER_DEPTH, MIN_ERROR_LEN,
    ShrinkPlan, broker_headroom, fit_copy, header_limit, headers_to_drop,
};
pub use tombstone_ledger::TombstoneLedger;
pub use topology::{
    Argument, ArgumentDifference, Binding, DEAD_LETTER_DELIVERY_LIMIT, DeadLetterIndexDecl,
    ExchangeDecl, INDEX_MAX_BYTES, INDEX_REMOVALS_MAX_BYTES, INDEX_REMOVALS_SEGMENT_BYTES,
    INDEX_SEGMENT_BYTES, QueueDecl, Topology, arguments,
};
