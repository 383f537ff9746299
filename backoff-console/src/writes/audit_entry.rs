//! One write as the audit log records it: who asked for it, when, what it
//! applied to (as its request said it) and how many messages it moved; for
//! a replay job, which job.

use serde::{Deserialize, Serialize};

use crate::selection::Selection;
use crate::writes::edit_request::EditRequest;
use crate::writes::job_request::JobRequest;

/// One write, as the audit records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AuditEntry {
    /// When it ended, RFC 3339 in UTC.
    pub at: String,
    /// The name of the token that asked for it.
    pub who: String,
    /// `replay`, `discard`, `edit`, `purge` or `rebuild-index`; for a
    /// replay job, one of [`JobAction`](super::job_action::JobAction)'s
    /// names (`replay-job`, `replay-job-pause`, …, `replay-job-end`).
    pub action: String,
    /// The consumer's work queue.
    pub queue: String,
    /// What it applied to, as the request said it.
    pub selection: AuditSelection,
    /// How many messages it replayed, discarded or purged (for a rebuild
    /// of the index: how many dead letters its checkpoint counts; for a
    /// replay job's end, how many copies it sent).
    pub count: usize,
    /// The `message_id`s of those messages (the first 100).
    pub message_ids: Vec<String>,
    /// Matching messages left in place, and why; or why it failed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// What else it did: for a purge or a rebuild of the index, the
    /// checkpoint it left in the dead-letter index (or why none); for a
    /// replay job, its plan, or where it ended.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
    /// The replay job it started, controlled or saw end.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub job: Option<String>,
}

impl AuditEntry {
    /// The entry of `action` on `queue` by `who`, now, before its outcome
    /// is known.
    pub(crate) fn new(who: &str, action: &str, queue: &str, selection: AuditSelection) -> Self {
        AuditEntry {
            at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            who: who.to_owned(),
            action: action.to_owned(),
            queue: queue.to_owned(),
            selection,
            count: 0,
            message_ids: Vec::new(),
            error: None,
            note: None,
            job: None,
        }
    }
}

/// What a write applied to, as its request said it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum AuditSelection {
    /// A replay or a discard: a group, messages or a search.
    Selection(Selection),
    /// An edit: the message and what changed.
    Edit(EditRequest),
    /// A purge or a rebuild of the index: the whole dead-letter queue.
    Queue(WholeQueue),
    /// A replay job's start: its selection and plan.
    ReplayJob(JobRequest),
    /// A replay job's control or end: its selection as its replay log
    /// describes it.
    Described(String),
    /// A line of an older log, shown as it is.
    Other(serde_json::Value),
}

/// The whole dead-letter queue of a consumer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WholeQueue {
    /// Its name (unknown when its consumer was not found).
    pub(crate) dead_letter_queue: Option<String>,
}

/// How many `message_id`s an entry lists.
pub(crate) const IDS_LISTED: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_is_recorded_as_the_request_said_it() {
        let queue = AuditSelection::Queue(WholeQueue {
            dead_letter_queue: Some("orders.dlq".into()),
        });
        let group = AuditSelection::Selection(Selection::Group("0123456789ab".into()));
        for (selection, json) in [
            (&queue, r#"{"dead_letter_queue":"orders.dlq"}"#),
            (&group, r#"{"group":"0123456789ab"}"#),
        ] {
            assert_eq!(serde_json::to_string(selection).unwrap(), json);
            let read: AuditSelection = serde_json::from_str(json).unwrap();
            assert_eq!(&read, selection, "read back as it was written");
        }
        let edit = r#"{"message_id":"m-1","body":"b","set_headers":{"k":"v"},"remove_headers":[]}"#;
        let read: AuditSelection = serde_json::from_str(edit).unwrap();
        assert!(matches!(read, AuditSelection::Edit(_)), "{read:?}");
        assert_eq!(serde_json::to_string(&read).unwrap(), edit);
        let job = r#"{"group":"0123456789ab","canary":5,"stop_above":"10%"}"#;
        let read: AuditSelection = serde_json::from_str(job).unwrap();
        assert!(matches!(read, AuditSelection::ReplayJob(_)), "{read:?}");
        assert_eq!(serde_json::to_string(&read).unwrap(), job);
        let described: AuditSelection = serde_json::from_str(r#""group 0123456789ab""#).unwrap();
        assert_eq!(
            described,
            AuditSelection::Described("group 0123456789ab".into())
        );
        let older: AuditSelection = serde_json::from_str(r#"{"anything":[1]}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&older).unwrap(),
            r#"{"anything":[1]}"#
        );
    }
}
