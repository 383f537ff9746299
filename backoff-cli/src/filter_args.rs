use std::time::SystemTime;

use clap::Args;
use rabbit_backoff::dead_letters::DeadLetterFilter;

/// Which dead letters a command applies to; the filters combine.
#[derive(Debug, Clone, Args)]
pub struct FilterArgs {
    /// Only messages whose x-error matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub error: Option<String>,
    /// Only messages that went through at least N retry tiers (x-retry-count).
    #[arg(long, value_name = "N")]
    pub min_count: Option<u32>,
    /// Only messages that failed with this routing key.
    #[arg(long, value_name = "KEY")]
    pub routing_key: Option<String>,
    /// Only messages that failed (x-failed-at) before TIME: RFC 3339
    /// (2026-12-01T10:00:00Z) or an age (30m, 2h).
    #[arg(long, visible_alias = "failed-before", value_name = "TIME", value_parser = parse_time)]
    pub before: Option<SystemTime>,
    /// Only messages that failed after TIME: RFC 3339 or an age (30m, 2h).
    #[arg(long, visible_alias = "failed-after", value_name = "TIME", value_parser = parse_time)]
    pub after: Option<SystemTime>,
    /// Only messages where TEXT is found, ignoring case: in x-error, in
    /// another header's name or value, in message_id or correlation_id, or
    /// anywhere in the body.
    #[arg(long, value_name = "TEXT")]
    pub text: Option<String>,
    /// Only messages of this group (an id from `dlq groups`).
    #[arg(long, value_name = "ID")]
    pub group: Option<String>,
    /// Only the message with this message_id property.
    #[arg(long, value_name = "ID")]
    pub message_id: Option<String>,
    /// At most N messages.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

impl FilterArgs {
    pub fn filter(&self) -> Result<DeadLetterFilter, String> {
        let mut filter = DeadLetterFilter::default();
        filter.min_count = self.min_count;
        filter.routing_key = self.routing_key.clone();
        filter.before = self.before;
        filter.after = self.after;
        filter.limit = self.limit;
        filter.group = self.group.clone();
        filter.message_id = self.message_id.clone();
        if let Some(text) = &self.text {
            filter = filter.text(text);
        }
        if let Some(pattern) = &self.error {
            filter = filter
                .error(pattern)
                .map_err(|e| format!("--error {pattern:?}: {e}"))?;
        }
        Ok(filter)
    }
}

/// An RFC 3339 instant, or an age counted back from now.
fn parse_time(s: &str) -> Result<SystemTime, String> {
    if let Ok(instant) = humantime::parse_rfc3339_weak(s) {
        return Ok(instant);
    }
    let age = humantime::parse_duration(s).map_err(|_| {
        format!("`{s}` is neither an RFC 3339 time (2026-12-01T10:00:00Z) nor an age (30m, 2h)")
    })?;
    SystemTime::now()
        .checked_sub(age)
        .ok_or_else(|| format!("`{s}` reaches before 1970"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        filter: FilterArgs,
    }

    #[test]
    fn reads_text_and_the_failed_at_range_under_both_names() {
        let parse = |args: &[&str]| {
            Command::try_parse_from(std::iter::once("dlq").chain(args.iter().copied()))
                .unwrap()
                .filter
                .filter()
                .unwrap()
        };
        let filter = parse(&[
            "--text",
            "Tenant-42",
            "--failed-after",
            "2026-12-01T10:00:00Z",
            "--failed-before",
            "2026-12-02T10:00:00Z",
        ]);
        assert!(filter.text.unwrap().is_match(b"for tenant-42"));
        let after = humantime::parse_rfc3339("2026-12-01T10:00:00Z").unwrap();
        assert_eq!(filter.after, Some(after));
        assert_eq!(
            filter.before,
            Some(humantime::parse_rfc3339("2026-12-02T10:00:00Z").unwrap())
        );
        // The older names still work.
        assert_eq!(
            parse(&["--after", "2026-12-01T10:00:00Z"]).after,
            Some(after)
        );
    }
}
