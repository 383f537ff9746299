//! [`FilterRecord`]: a [`DeadLetterFilter`] as a replay job keeps it in its
//! log, so that the job can be resumed with its selection, and described.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use regex::Regex;
use regex::bytes::RegexBuilder;
use serde::{Deserialize, Serialize};

use crate::filter::DeadLetterFilter;

/// A [`DeadLetterFilter`] written down: the patterns as their sources, the
/// instants in milliseconds since the epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct FilterRecord {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    routing_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_ids: Option<Vec<String>>,
    /// The case-insensitive pattern [`DeadLetterFilter::text`] built.
    #[serde(skip_serializing_if = "Option::is_none")]
    text_pattern: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<usize>,
}

fn millis(instant: SystemTime) -> u64 {
    instant
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl FilterRecord {
    /// `filter`, written down.
    pub(crate) fn of(filter: &DeadLetterFilter) -> Self {
        FilterRecord {
            error: filter.error.as_ref().map(|r| r.as_str().to_owned()),
            min_count: filter.min_count,
            routing_key: filter.routing_key.clone(),
            before_ms: filter.before.map(millis),
            after_ms: filter.after.map(millis),
            group: filter.group.clone(),
            message_id: filter.message_id.clone(),
            message_ids: filter
                .message_ids
                .as_ref()
                .map(|ids| ids.iter().cloned().collect()),
            text_pattern: filter.text.as_ref().map(|r| r.as_str().to_owned()),
            limit: filter.limit,
        }
    }

    /// The filter again; `None` when a pattern no longer compiles.
    pub(crate) fn filter(&self) -> Option<DeadLetterFilter> {
        let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(ms);
        let error = match &self.error {
            Some(pattern) => Some(Regex::new(pattern).ok()?),
            None => None,
        };
        let text = match &self.text_pattern {
            Some(pattern) => Some(
                RegexBuilder::new(pattern)
                    .case_insensitive(true)
                    .build()
                    .ok()?,
            ),
            None => None,
        };
        Some(DeadLetterFilter {
            error,
            min_count: self.min_count,
            routing_key: self.routing_key.clone(),
            before: self.before_ms.map(at),
            after: self.after_ms.map(at),
            group: self.group.clone(),
            message_id: self.message_id.clone(),
            message_ids: self
                .message_ids
                .as_ref()
                .map(|ids| ids.iter().cloned().collect()),
            text,
            limit: self.limit,
            ..DeadLetterFilter::default()
        })
    }

    /// The selection as an operator reads it: `group 3f2a…, error /db/`,
    /// or `every dead letter`.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(group) = &self.group {
            parts.push(format!("group {group}"));
        }
        if let Some(error) = &self.error {
            parts.push(format!("error /{error}/"));
        }
        if let Some(text) = &self.text_pattern {
            parts.push(format!("text /{text}/i"));
        }
        if let Some(id) = &self.message_id {
            parts.push(format!("message id {id}"));
        }
        if let Some(ids) = &self.message_ids {
            parts.push(format!("{} message ids", ids.len()));
        }
        if let Some(key) = &self.routing_key {
            parts.push(format!("routing key {key}"));
        }
        if let Some(count) = self.min_count {
            parts.push(format!("retry count ≥ {count}"));
        }
        if self.before_ms.is_some() || self.after_ms.is_some() {
            parts.push("failed within a time range".to_owned());
        }
        if let Some(limit) = self.limit {
            parts.push(format!("at most {limit}"));
        }
        if parts.is_empty() {
            "every dead letter".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_survives_its_record() {
        let filter = DeadLetterFilter::default()
            .error("db (down|gone)")
            .unwrap()
            .text("Tenant-42")
            .group("3f2a")
            .min_count(2)
            .limit(10);
        let record = FilterRecord::of(&filter);
        let json = serde_json::to_string(&record).unwrap();
        let again: FilterRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(again, record);
        let back = again.filter().unwrap();
        assert_eq!(FilterRecord::of(&back), record);
        assert!(back.text.unwrap().is_match(b"tenant-42"));
        assert_eq!(
            record.describe(),
            "group 3f2a, error /db (down|gone)/, text /Tenant\\-42/i, retry count ≥ 2, at most 10"
        );
    }
}
