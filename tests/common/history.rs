//! A history of one run under faults, and its check: every message the
//! broker confirmed to the publisher is, at the end, handled exactly once
//! (one effect row) or in the dead-letter queue with a reason, as its job
//! says. Pure logic, no I/O: the partition tests fill it from the publisher's
//! confirms, the effect table, the handler's calls and the drained
//! dead-letter queue (cluster-tests/tests/partitions/); tests/history.rs checks the
//! checker.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// What should become of a message, as its job says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Succeeds, at once or on a retry: one effect row, no dead letter.
    Handled,
    /// Fails permanently: a dead letter with a reason, no effect row.
    DeadLettered,
}

/// What was seen of the run, per message id.
#[derive(Debug, Default, Clone)]
pub struct History {
    confirmed: BTreeMap<u64, Expect>,
    effects: BTreeMap<u64, usize>,
    dead: BTreeMap<u64, Vec<Option<String>>>,
    /// Handler calls per (id, retry count).
    calls: BTreeMap<(u64, u32), usize>,
}

impl History {
    /// The broker confirmed message `id` to the publisher.
    pub fn confirmed(&mut self, id: u64, expect: Expect) {
        self.confirmed.insert(id, expect);
    }

    /// One effect row of message `id` (the handler's transaction committed).
    pub fn effect(&mut self, id: u64) {
        *self.effects.entry(id).or_default() += 1;
    }

    /// One copy of message `id` in the dead-letter queue, with its reason
    /// header (`x-dead-letter-reason`) when it has one.
    pub fn dead_letter(&mut self, id: u64, reason: Option<String>) {
        self.dead.entry(id).or_default().push(reason);
    }

    /// One handler call of message `id` at `retry_count`.
    pub fn call(&mut self, id: u64, retry_count: u32) {
        *self.calls.entry((id, retry_count)).or_default() += 1;
    }

    /// The check.
    pub fn check(&self) -> Report {
        let mut report = Report {
            confirmed: self.confirmed.len(),
            ..Report::default()
        };
        for (&id, &expect) in &self.confirmed {
            let effects = self.effects.get(&id).copied().unwrap_or(0);
            let dead = self.dead.get(&id).map_or(0, Vec::len);
            match (effects, dead) {
                (0, 0) => report.lost.push(id),
                (_, 0) => report.handled += 1,
                (0, _) => report.dead_lettered += 1,
                (_, _) => report.both.push(id),
            }
            let outcome = match (effects > 0, dead > 0) {
                (true, false) => Some(Expect::Handled),
                (false, true) => Some(Expect::DeadLettered),
                _ => None,
            };
            if outcome.is_some_and(|o| o != expect) {
                report.wrong_outcome.push(id);
            }
        }
        // Every id seen, confirmed or not: a message whose confirm was lost
        // may still have been taken, and must not have two effects either.
        for (&id, &n) in &self.effects {
            if n > 1 {
                report.duplicate_effects.push((id, n));
            }
        }
        for (&id, reasons) in &self.dead {
            if reasons.len() > 1 {
                report.duplicate_dead_letters.push((id, reasons.len()));
            }
            if reasons
                .iter()
                .any(|r| r.as_deref().is_none_or(str::is_empty))
            {
                report.dead_without_reason.push(id);
            }
        }
        report.duplicate_deliveries = self.calls.values().map(|n| n - 1).sum();
        let confirmed: BTreeSet<u64> = self.confirmed.keys().copied().collect();
        report.unconfirmed_taken = self
            .effects
            .keys()
            .chain(self.dead.keys())
            .filter(|id| !confirmed.contains(id))
            .collect::<BTreeSet<_>>()
            .len();
        report
    }
}

/// The outcome of a check: what was lost or doubled, and the counts.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Messages the broker confirmed.
    pub confirmed: usize,
    /// Confirmed messages with one or more effect rows and no dead letter.
    pub handled: usize,
    /// Confirmed messages in the dead-letter queue and without effect.
    pub dead_lettered: usize,
    /// Confirmed messages with neither an effect row nor a dead letter.
    pub lost: Vec<u64>,
    /// Confirmed messages with an effect row and a dead letter.
    pub both: Vec<u64>,
    /// Handled though they should have been dead-lettered, or the reverse.
    pub wrong_outcome: Vec<u64>,
    /// Messages with more than one effect row, and how many.
    pub duplicate_effects: Vec<(u64, usize)>,
    /// Messages dead-lettered more than once, and how many times: a dead
    /// letter whose confirm was lost with its connection is sent again
    /// (at-least-once, as every copy the runtime makes); reported, not a
    /// failure, as a replay of both copies is one replay for the inbox.
    pub duplicate_dead_letters: Vec<(u64, usize)>,
    /// Dead letters without a reason header.
    pub dead_without_reason: Vec<u64>,
    /// Handler calls beyond the first at the same retry count: deliveries
    /// the broker made again (an ack lost with a connection, say) that the
    /// inbox let through because nothing was committed for them.
    pub duplicate_deliveries: usize,
    /// Messages whose publish was not confirmed (the publisher saw an
    /// error) but which were handled or dead-lettered all the same.
    pub unconfirmed_taken: usize,
}

impl Report {
    /// Nothing lost, no effect twice, every outcome as its job says, every
    /// dead letter with a reason (duplicate deliveries and dead letters are
    /// counted, not failures).
    pub fn is_clean(&self) -> bool {
        self.lost.is_empty()
            && self.both.is_empty()
            && self.wrong_outcome.is_empty()
            && self.duplicate_effects.is_empty()
            && self.dead_without_reason.is_empty()
    }
}

/// The first ids of a list, for a message.
fn some<T: fmt::Debug>(items: &[T]) -> String {
    let shown: Vec<String> = items.iter().take(10).map(|i| format!("{i:?}")).collect();
    let more = items.len().saturating_sub(10);
    if more > 0 {
        format!("[{} and {more} more]", shown.join(", "))
    } else {
        format!("[{}]", shown.join(", "))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} confirmed: {} handled, {} dead-lettered; lost {}, duplicate effects {}, \
             duplicate dead letters {}, duplicate deliveries {}, unconfirmed but taken {}",
            self.confirmed,
            self.handled,
            self.dead_lettered,
            self.lost.len(),
            self.duplicate_effects.len(),
            self.duplicate_dead_letters.len(),
            self.duplicate_deliveries,
            self.unconfirmed_taken,
        )?;
        for (what, list) in [
            ("lost", some(&self.lost)),
            ("handled and dead-lettered", some(&self.both)),
            ("outcome not as the job says", some(&self.wrong_outcome)),
            (
                "duplicate effects (id, rows)",
                some(&self.duplicate_effects),
            ),
            (
                "duplicate dead letters (id, copies)",
                some(&self.duplicate_dead_letters),
            ),
            (
                "dead letters without a reason",
                some(&self.dead_without_reason),
            ),
        ] {
            if list != "[]" {
                write!(f, "; {what}: {list}")?;
            }
        }
        Ok(())
    }
}
