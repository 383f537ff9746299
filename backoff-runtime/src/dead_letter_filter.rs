use std::time::SystemTime;

use regex::Regex;

use crate::DeadLetterMessage;

/// Which dead letters an operation applies to. Every criterion set must hold;
/// an empty filter matches everything.
///
/// ```
/// use backoff_runtime::DeadLetterFilter;
///
/// let filter = DeadLetterFilter::default()
///     .error("timeout|unavailable")?
///     .min_count(3)
///     .limit(100);
/// # Ok::<(), regex::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct DeadLetterFilter {
    /// `x-error` matches this pattern.
    pub error: Option<Regex>,
    /// `x-retry-count` is at least this.
    pub min_count: Option<u32>,
    /// `x-original-routing-key` is exactly this.
    pub routing_key: Option<String>,
    /// `x-failed-at` is before this instant.
    pub before: Option<SystemTime>,
    /// `x-failed-at` is after this instant.
    pub after: Option<SystemTime>,
    /// At most this many messages.
    pub limit: Option<usize>,
}

impl DeadLetterFilter {
    /// Only messages whose `x-error` matches `pattern`.
    pub fn error(mut self, pattern: &str) -> Result<Self, regex::Error> {
        self.error = Some(Regex::new(pattern)?);
        Ok(self)
    }

    /// Only messages that went through at least `count` retry tiers.
    pub fn min_count(mut self, count: u32) -> Self {
        self.min_count = Some(count);
        self
    }

    /// Only messages that failed with this routing key.
    pub fn routing_key(mut self, key: impl Into<String>) -> Self {
        self.routing_key = Some(key.into());
        self
    }

    /// Only messages that failed before `instant`.
    pub fn before(mut self, instant: SystemTime) -> Self {
        self.before = Some(instant);
        self
    }

    /// Only messages that failed after `instant`.
    pub fn after(mut self, instant: SystemTime) -> Self {
        self.after = Some(instant);
        self
    }

    /// At most `limit` messages.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Whether `message` meets every criterion (the limit aside).
    pub fn matches(&self, message: &DeadLetterMessage) -> bool {
        if let Some(pattern) = &self.error
            && !message
                .error
                .as_deref()
                .is_some_and(|e| pattern.is_match(e))
        {
            return false;
        }
        if let Some(min) = self.min_count
            && message.retry_count.unwrap_or(0) < min
        {
            return false;
        }
        if let Some(key) = &self.routing_key
            && message.routing_key.as_deref() != Some(key.as_str())
        {
            return false;
        }
        if self.before.is_some() || self.after.is_some() {
            let Some(failed_at) = message
                .failed_at
                .as_deref()
                .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            else {
                return false;
            };
            if self.before.is_some_and(|before| failed_at >= before)
                || self.after.is_some_and(|after| failed_at <= after)
            {
                return false;
            }
        }
        true
    }
}
