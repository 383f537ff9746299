//! [`DeadLetterGroup`]: dead letters grouped by what failed them, with a
//! [`GroupTally`] each.

use std::collections::HashMap;
use std::time::SystemTime;

use rabbit_backoff_core::{fingerprint, parse_failed_at};
use serde::{Deserialize, Serialize};

use crate::message::DeadLetterMessage;

/// Dead letters that failed the same way: the same reason and the same
/// error [`fingerprint`](rabbit_backoff_core::fingerprint), so that "order 17 not
/// found" and "order 42 not found" are one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeadLetterGroup {
    /// Its id: 12 hex digits, the same for the same reason and fingerprint in
    /// every run; [`DeadLetterFilter::group`](crate::DeadLetterFilter::group)
    /// selects its messages.
    pub id: String,
    /// How many dead letters it holds.
    pub count: usize,
    /// `x-dead-letter-reason`, or `-` for dead letters without one (those of
    /// hand-written consumers).
    pub reason: String,
    /// The error with what varies from message to message masked.
    pub fingerprint: String,
    /// The earliest `x-failed-at` in the group, as written.
    pub first_failed_at: Option<String>,
    /// The latest `x-failed-at` in the group, as written.
    pub last_failed_at: Option<String>,
    /// The `message_id` of one of its messages: of those that have one,
    /// the earliest to fail (the smallest id among those that failed in the
    /// same millisecond), so that a read of the index and a read of the
    /// queue, which see the messages in other orders, name the same one.
    pub example_message_id: Option<String>,
    /// The error of that message, unmasked.
    pub example_error: Option<String>,
}

/// Collects groups from dead letters one at a time, in constant memory per
/// group (not per message): what [`Dlq::groups`](crate::Dlq::groups) does,
/// for a caller that gathers more in the same [`Dlq::visit`](crate::Dlq::visit).
///
/// ```no_run
/// # async fn demo(dlq: rabbit_backoff::dead_letters::Dlq) -> Result<(), rabbit_backoff::Error> {
/// use rabbit_backoff::dead_letters::{DeadLetterFilter, GroupTally};
///
/// let mut tally = GroupTally::default();
/// let mut largest = 0;
/// dlq.visit(&DeadLetterFilter::default(), &mut |_, message| {
///     tally.add(message);
///     largest = largest.max(message.body_len);
///     Ok(())
/// })
/// .await?;
/// println!("{} groups, largest body {largest} bytes", tally.into_groups().len());
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct GroupTally {
    groups: HashMap<String, Tally>,
}

#[derive(Debug)]
struct Tally {
    group: DeadLetterGroup,
    first: Option<SystemTime>,
    last: Option<SystemTime>,
    /// When the example failed, when it says.
    example_at: Option<SystemTime>,
    /// The order groups were first seen in, to break ties in the listing.
    seen: usize,
}

impl Tally {
    /// Whether a message with `id` that failed `at` makes a better example
    /// than the one kept: any message with an id over none, one with a time
    /// over one without, an earlier time, the smaller id at the same time.
    fn better_example(&self, id: &str, at: Option<SystemTime>) -> bool {
        let Some(kept) = self.group.example_message_id.as_deref() else {
            return true;
        };
        match (at, self.example_at) {
            (Some(at), Some(kept_at)) => at < kept_at || (at == kept_at && id < kept),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Keeps `id`, with its error and time, as the example when it is better.
    fn offer_example(
        &mut self,
        id: Option<&String>,
        error: Option<&String>,
        at: Option<SystemTime>,
    ) {
        let Some(id) = id else {
            return;
        };
        if self.better_example(id, at) {
            self.group.example_message_id = Some(id.clone());
            self.group.example_error = error.cloned();
            self.example_at = at;
        }
    }
}

impl GroupTally {
    /// Counts `message` in its group.
    pub fn add(&mut self, message: &DeadLetterMessage) {
        let seen = self.groups.len();
        let tally = self
            .groups
            .entry(message.group.clone())
            .or_insert_with(|| Tally {
                group: DeadLetterGroup {
                    id: message.group.clone(),
                    count: 0,
                    reason: message.reason.clone().unwrap_or_else(|| "-".to_owned()),
                    fingerprint: fingerprint(message.error.as_deref().unwrap_or("")),
                    first_failed_at: None,
                    last_failed_at: None,
                    example_message_id: None,
                    example_error: message.error.clone(),
                },
                first: None,
                last: None,
                example_at: None,
                seen,
            });
        tally.group.count += 1;
        let at = message.failed_at.as_deref().and_then(parse_failed_at);
        tally.offer_example(message.message_id.as_ref(), message.error.as_ref(), at);
        let Some(raw) = message.failed_at.as_deref() else {
            return;
        };
        let Some(at) = parse_failed_at(raw) else {
            return;
        };
        if tally.first.is_none_or(|first| at < first) {
            tally.first = Some(at);
            tally.group.first_failed_at = Some(raw.to_owned());
        }
        if tally.last.is_none_or(|last| at > last) {
            tally.last = Some(at);
            tally.group.last_failed_at = Some(raw.to_owned());
        }
    }

    /// Counts a whole group, as another tally (a checkpoint of the index)
    /// listed it: its count added, its time span widened, its example kept
    /// when this tally has none yet.
    pub(crate) fn add_group(&mut self, group: DeadLetterGroup) {
        let seen = self.groups.len();
        let parse = |raw: &Option<String>| raw.as_deref().and_then(parse_failed_at);
        let (first, last) = (parse(&group.first_failed_at), parse(&group.last_failed_at));
        let Some(tally) = self.groups.get_mut(&group.id) else {
            self.groups.insert(
                group.id.clone(),
                Tally {
                    first,
                    last,
                    group,
                    // The group's earliest failure: its example's, unless
                    // the earliest had no message id.
                    example_at: first,
                    seen,
                },
            );
            return;
        };
        tally.group.count += group.count;
        tally.offer_example(
            group.example_message_id.as_ref(),
            group.example_error.as_ref(),
            first,
        );
        if let Some(at) = first
            && tally.first.is_none_or(|first| at < first)
        {
            tally.first = Some(at);
            tally.group.first_failed_at = group.first_failed_at;
        }
        if let Some(at) = last
            && tally.last.is_none_or(|last| at > last)
        {
            tally.last = Some(at);
            tally.group.last_failed_at = group.last_failed_at;
        }
    }

    /// Takes up to `n` dead letters out of the group `id` (its time span
    /// and example stay); a group left empty is dropped. How many were
    /// taken.
    pub(crate) fn subtract(&mut self, id: &str, n: usize) -> usize {
        let Some(tally) = self.groups.get_mut(id) else {
            return 0;
        };
        let taken = n.min(tally.group.count);
        tally.group.count -= taken;
        if tally.group.count == 0 {
            self.groups.remove(id);
        }
        taken
    }

    /// The dead letters counted, in every group.
    pub(crate) fn total(&self) -> usize {
        self.groups.values().map(|t| t.group.count).sum()
    }

    /// The groups in the order they were first seen (what a checkpoint
    /// keeps, so that a later tally breaks ties as a pass would).
    pub(crate) fn into_seen_order(self) -> Vec<DeadLetterGroup> {
        let mut tallies: Vec<Tally> = self.groups.into_values().collect();
        tallies.sort_by_key(|t| t.seen);
        tallies.into_iter().map(|t| t.group).collect()
    }

    /// The groups, largest first (then in the order they were first seen).
    pub fn into_groups(self) -> Vec<DeadLetterGroup> {
        let mut tallies: Vec<Tally> = self.groups.into_values().collect();
        tallies.sort_by(|a, b| b.group.count.cmp(&a.group.count).then(a.seen.cmp(&b.seen)));
        tallies.into_iter().map(|t| t.group).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rabbit_backoff_core::group_id;

    fn message(id: &str, reason: Option<&str>, error: &str, failed_at: &str) -> DeadLetterMessage {
        DeadLetterMessage {
            position: 0,
            routing_key: None,
            original_queue: None,
            retry_count: None,
            error: Some(error.to_owned()),
            failed_at: Some(failed_at.to_owned()),
            reason: reason.map(str::to_owned),
            message_id: Some(id.to_owned()),
            correlation_id: None,
            headers: Default::default(),
            body_len: 0,
            body_preview: String::new(),
            redelivered: false,
            group: group_id(reason, &fingerprint(error)),
        }
    }

    #[test]
    fn groups_by_reason_and_fingerprint_with_the_time_span() {
        let mut tally = GroupTally::default();
        tally.add(&message(
            "a",
            Some("permanent"),
            "order 17 not found",
            "2026-12-02T10:00:05Z",
        ));
        tally.add(&message(
            "b",
            Some("exhausted"),
            "timeout after 30 s",
            "2026-12-02T10:00:01Z",
        ));
        tally.add(&message(
            "c",
            Some("permanent"),
            "order 42 not found",
            "2026-12-02T10:00:01Z",
        ));
        tally.add(&message(
            "d",
            Some("permanent"),
            "order 7 not found",
            "2026-12-02T10:00:09Z",
        ));
        tally.add(&message(
            "e",
            None,
            "order 8 not found",
            "2026-12-02T10:00:09.000Z",
        ));
        let groups = tally.into_groups();
        assert_eq!(groups.len(), 3);
        let first = &groups[0];
        assert_eq!(first.count, 3);
        assert_eq!(first.reason, "permanent");
        assert_eq!(first.fingerprint, "order <n> not found");
        assert_eq!(
            first.first_failed_at.as_deref(),
            Some("2026-12-02T10:00:01Z")
        );
        assert_eq!(
            first.last_failed_at.as_deref(),
            Some("2026-12-02T10:00:09Z")
        );
        // The earliest to fail, not the first read.
        assert_eq!(first.example_message_id.as_deref(), Some("c"));
        assert_eq!(first.id, group_id(Some("permanent"), "order <n> not found"));
        // Equal counts keep the order they were first seen in.
        assert_eq!(groups[1].reason, "exhausted");
        assert_eq!(groups[2].reason, "-");
    }

    #[test]
    fn the_example_is_the_same_whatever_order_the_messages_come_in() {
        let messages = [
            message(
                "c",
                Some("permanent"),
                "order 1 not found",
                "2026-12-02T10:00:05Z",
            ),
            message(
                "b",
                Some("permanent"),
                "order 2 not found",
                "2026-12-02T10:00:02Z",
            ),
            message(
                "a",
                Some("permanent"),
                "order 3 not found",
                "2026-12-02T10:00:02Z",
            ),
            message(
                "d",
                Some("permanent"),
                "order 4 not found",
                "2026-12-02T10:00:03Z",
            ),
        ];
        let mut orders = vec![messages.to_vec()];
        orders.push(messages.iter().rev().cloned().collect());
        orders.push(vec![
            messages[3].clone(),
            messages[0].clone(),
            messages[2].clone(),
            messages[1].clone(),
        ]);
        for order in orders {
            let mut tally = GroupTally::default();
            for m in &order {
                tally.add(m);
            }
            let group = &tally.into_groups()[0];
            assert_eq!(group.example_message_id.as_deref(), Some("a"), "{order:?}");
            assert_eq!(group.example_error.as_deref(), Some("order 3 not found"));
        }
    }

    #[test]
    fn whole_groups_merge_as_their_messages_would_and_can_be_taken_out() {
        let messages = [
            message(
                "a",
                Some("permanent"),
                "order 1 not found",
                "2026-12-02T10:00:05Z",
            ),
            message(
                "b",
                Some("exhausted"),
                "timeout after 3 s",
                "2026-12-02T10:00:01Z",
            ),
            message(
                "c",
                Some("permanent"),
                "order 2 not found",
                "2026-12-02T10:00:09Z",
            ),
            message(
                "d",
                Some("exhausted"),
                "timeout after 4 s",
                "2026-12-02T10:00:00Z",
            ),
        ];
        let mut whole = GroupTally::default();
        messages.iter().for_each(|m| whole.add(m));
        // The first two as a checkpoint's groups, then the rest one by one.
        let mut first = GroupTally::default();
        messages[..2].iter().for_each(|m| first.add(m));
        let mut merged = GroupTally::default();
        first
            .into_seen_order()
            .into_iter()
            .for_each(|g| merged.add_group(g));
        messages[2..].iter().for_each(|m| merged.add(m));
        assert_eq!(merged.total(), 4);
        assert_eq!(merged.into_groups(), whole.into_groups());

        let mut tally = GroupTally::default();
        messages.iter().for_each(|m| tally.add(m));
        let permanent = messages[0].group.clone();
        assert_eq!(tally.subtract(&permanent, 5), 2);
        assert_eq!(tally.subtract("000000000000", 1), 0);
        let groups = tally.into_groups();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].reason, "exhausted");
    }
}
