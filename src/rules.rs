//! The rules the runtime executes, as pure functions and values without
//! I/O: the decision for one outcome, the headers of a copy and of a dead
//! letter, the retry count, error fingerprints and group ids, dedupe keys,
//! the reconnect backoff, the circuit breaker's states.

pub use rabbit_backoff_core::{
    Attempt, BreakerState, DeadLetter, DeadLetterReason, Decision, FAILURE_HEADERS, HeaderValue,
    KeyFate, MAX_ERROR_LEN, MAX_HEADER_DEPTH, MIN_PROBE_INTERVAL, MetadataProbe, MetadataWatch,
    MissCounter, NodeProbe, Outcome, Policy, ProbeVerdict, REPLAY_HISTORY, REPLAY_HISTORY_LIMIT,
    REPLAYED_AT, ReconnectBackoff, ReconnectProbe, RetryCount, RetryCountWarning, ReturnWatch,
    Verdict, WatchVerdict, connect_order, decide, deep_headers, fingerprint, group_id, headers,
    inbox_key, index_key, outbox_message_id, parse_failed_at, read_retry_count, truncate_error,
};
pub use rabbit_backoff_core::{
    Fate, FateBatch, FateCounts, FateTally, MAX_CANARY, PlanError, REPLAY_LOG_MAX_AGE,
    REPLAY_LOG_MAX_BYTES, ReplayFate, ReplayPlan, ReplayVerdict, parse_rate, parse_threshold,
    replay_log_decl,
};
