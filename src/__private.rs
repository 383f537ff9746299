//! What the macros' generated code names. Not public API: it may change in any release.

pub use rabbit_backoff_core::{
    BreakerSpec, Classify, ConsumerSpec, DeadLetterIndex, DeclareMode, Dedupe, Delays, ErrorClass,
    ExchangeKind, Jitter, QueueType, RetryBackend, RetryReturn, Verdict,
};
pub use rabbit_backoff_runtime::{Consumer, Context, FromContext, State, StateRequirement};

/// The delays of an attribute, validated at compile time.
pub fn delays(delays: &str) -> Delays {
    delays.parse().unwrap_or_else(|e| {
        unreachable!("#[backoff_consumer] validated the delays at compile time: {e}")
    })
}

/// A circuit breaker validated at compile time.
pub fn breaker(breaker: &str) -> BreakerSpec {
    breaker.parse().unwrap_or_else(|e| {
        unreachable!("#[backoff_consumer] validated the breaker at compile time: {e}")
    })
}

/// A jitter validated at compile time.
pub fn jitter(percent: u8) -> Jitter {
    Jitter::new(percent).unwrap_or_else(|e| {
        unreachable!("#[backoff_consumer] validated the jitter at compile time: {e}")
    })
}

/// An exchange type validated at compile time.
pub fn exchange_kind(kind: &str) -> ExchangeKind {
    kind.parse().unwrap_or_else(|e| {
        unreachable!("#[backoff_consumer] validated the exchange type at compile time: {e}")
    })
}

/// A queue type validated at compile time, as the attribute named it.
pub fn queue_type(name: &str) -> Option<QueueType> {
    Some(name.parse().unwrap_or_else(|e| {
        unreachable!("#[backoff_consumer] validated the queue type at compile time: {e}")
    }))
}

/// An inbox validated at compile time: its window in milliseconds and its key.
pub fn dedupe(window_ms: u64, key: &str) -> Dedupe {
    let key = key.parse().unwrap_or_else(|e| {
        unreachable!("#[backoff_consumer] validated the dedupe key at compile time: {e}")
    });
    Dedupe::new(std::time::Duration::from_millis(window_ms)).with_key(key)
}
