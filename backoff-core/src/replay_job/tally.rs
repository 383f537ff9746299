//! [`FateTally`]: the fates a replay has seen, and the verdict it draws
//! from them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::fate::{Fate, ReplayFate};
use super::plan::ReplayPlan;

/// How a replay's copies fare so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FateCounts {
    /// Copies sent.
    pub sent: u64,
    /// Handled by their consumer.
    pub handled: u64,
    /// Failed with a transient error, waiting for a retry.
    pub retrying: u64,
    /// In the dead-letter queue again.
    pub dead_lettered: u64,
    /// Dropped as obsolete by their handler.
    pub discarded: u64,
    /// Sent, with no fate yet.
    pub waiting: u64,
}

impl FateCounts {
    /// Copies that failed again: retrying or dead-lettered.
    pub fn failing(&self) -> u64 {
        self.retrying + self.dead_lettered
    }
}

/// What a replay does next.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayVerdict {
    /// Some fates are still to come.
    Wait,
    /// The failures are within the threshold: go on.
    Go,
    /// No fate came at all (the queue's consumer is not this framework, or
    /// is down): the threshold cannot be applied, and the replay goes on
    /// unwatched.
    GoUnwatched,
    /// Too many failed again: stop.
    Stop {
        /// Failures among the fates judged.
        failing: u64,
        /// Fates judged.
        of: u64,
    },
}

/// The fates a replay job has seen, by copy: the latest fate of each (a
/// copy that was retrying and then handled counts as handled).
///
/// ```
/// use rabbit_backoff_core::{Fate, FateTally, ReplayFate, ReplayPlan, ReplayVerdict};
///
/// let plan = ReplayPlan::new(4, 0.25)?;
/// let mut tally = FateTally::default();
/// for seq in 0..4 {
///     tally.sent(seq);
/// }
/// assert_eq!(tally.canary(&plan, 4, false), ReplayVerdict::Wait);
/// for seq in 0..4 {
///     let fate = if seq < 2 { Fate::DeadLettered } else { Fate::Handled };
///     tally.record(&ReplayFate::new("r-1", seq, fate, Some("db down".into())));
/// }
/// assert_eq!(tally.canary(&plan, 4, false), ReplayVerdict::Stop { failing: 2, of: 4 });
/// assert_eq!(tally.counts().dead_lettered, 2);
/// # Ok::<(), rabbit_backoff_core::PlanError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct FateTally {
    sent: u64,
    latest: BTreeMap<u64, (Fate, Option<String>)>,
    withdrawn: BTreeSet<u64>,
}

impl FateTally {
    /// Records that copy `seq` was sent.
    pub fn sent(&mut self, seq: u64) {
        self.sent = self.sent.max(seq + 1);
    }

    /// Records that copy `seq`, claimed, was not sent after all (the
    /// broker refused it): it counts neither as sent nor as waiting.
    pub fn withdraw(&mut self, seq: u64) {
        if seq < self.sent && !self.latest.contains_key(&seq) {
            self.withdrawn.insert(seq);
        }
    }

    /// Records a fate of one of the job's copies: the latest replaces an
    /// earlier one.
    pub fn record(&mut self, fate: &ReplayFate) {
        self.latest
            .insert(fate.seq, (fate.fate, fate.error.clone()));
    }

    /// Whether copy `seq` has a fate: the consumer saw it, so it was sent.
    pub fn has_fate(&self, seq: u64) -> bool {
        self.latest.contains_key(&seq)
    }

    /// How the copies fare.
    pub fn counts(&self) -> FateCounts {
        let sent = self.sent - self.withdrawn.len() as u64;
        let mut counts = FateCounts {
            sent,
            ..FateCounts::default()
        };
        for (fate, _) in self.latest.values() {
            match fate {
                Fate::Handled => counts.handled += 1,
                Fate::Retrying => counts.retrying += 1,
                Fate::DeadLettered => counts.dead_lettered += 1,
                Fate::Discarded => counts.discarded += 1,
            }
        }
        counts.waiting = sent.saturating_sub(self.latest.len() as u64);
        counts
    }

    /// The verdict on a canary of the first `canary` copies: wait until
    /// each has a fate (or `waited_out`), then judge the known ones.
    pub fn canary(&self, plan: &ReplayPlan, canary: u64, waited_out: bool) -> ReplayVerdict {
        let known: Vec<Fate> = self
            .latest
            .range(..canary)
            .map(|(_, (fate, _))| *fate)
            .collect();
        let withdrawn = self.withdrawn.range(..canary).count();
        if ((known.len() + withdrawn) as u64) < canary && !waited_out {
            return ReplayVerdict::Wait;
        }
        judge(plan, &known)
    }

    /// The verdict during the waves: on the latest `plan.window` fates
    /// (by copy), once there are as many as the window or the canary.
    pub fn waves(&self, plan: &ReplayPlan) -> ReplayVerdict {
        let window = plan.window as usize;
        let known: Vec<Fate> = self
            .latest
            .values()
            .rev()
            .take(window)
            .map(|(fate, _)| *fate)
            .collect();
        if known.len() < window.min(plan.canary as usize) {
            return ReplayVerdict::Go;
        }
        match judge(plan, &known) {
            ReplayVerdict::GoUnwatched => ReplayVerdict::Go,
            verdict => verdict,
        }
    }

    /// The errors of the copies failing now, most frequent first, at most
    /// `n`, each with how many copies failed with it.
    pub fn top_errors(&self, n: usize) -> Vec<(String, u64)> {
        let mut by_error: HashMap<&str, u64> = HashMap::new();
        for (fate, error) in self.latest.values() {
            if fate.is_failure() {
                *by_error
                    .entry(error.as_deref().unwrap_or("(no error given)"))
                    .or_default() += 1;
            }
        }
        let mut errors: Vec<(String, u64)> = by_error
            .into_iter()
            .map(|(error, count)| (error.to_owned(), count))
            .collect();
        errors.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        errors.truncate(n);
        errors
    }
}

fn judge(plan: &ReplayPlan, known: &[Fate]) -> ReplayVerdict {
    if known.is_empty() {
        return ReplayVerdict::GoUnwatched;
    }
    let failing = known.iter().filter(|fate| fate.is_failure()).count() as u64;
    let of = known.len() as u64;
    if failing as f64 > plan.stop_above * of as f64 {
        ReplayVerdict::Stop { failing, of }
    } else {
        ReplayVerdict::Go
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fate(seq: u64, fate: Fate) -> ReplayFate {
        ReplayFate::new(
            "r",
            seq,
            fate,
            fate.is_failure().then(|| "db down".to_owned()),
        )
    }

    #[test]
    fn a_canary_without_any_fate_goes_on_unwatched_once_waited_out() {
        let plan = ReplayPlan::new(5, 0.1).unwrap();
        let mut tally = FateTally::default();
        (0..5).for_each(|seq| tally.sent(seq));
        assert_eq!(tally.canary(&plan, 5, false), ReplayVerdict::Wait);
        assert_eq!(tally.canary(&plan, 5, true), ReplayVerdict::GoUnwatched);
        assert_eq!(tally.counts().waiting, 5);
    }

    #[test]
    fn a_withdrawn_copy_is_neither_sent_nor_awaited() {
        let plan = ReplayPlan::new(3, 0.1).unwrap();
        let mut tally = FateTally::default();
        (0..3).for_each(|seq| tally.sent(seq));
        tally.record(&fate(0, Fate::Handled));
        tally.record(&fate(2, Fate::Handled));
        assert_eq!(tally.canary(&plan, 3, false), ReplayVerdict::Wait);
        tally.withdraw(1);
        assert_eq!(tally.canary(&plan, 3, false), ReplayVerdict::Go);
        let counts = tally.counts();
        assert_eq!((counts.sent, counts.waiting), (2, 0));
    }

    #[test]
    fn a_retry_that_then_succeeds_counts_as_handled() {
        let mut tally = FateTally::default();
        tally.sent(0);
        tally.record(&fate(0, Fate::Retrying));
        assert_eq!(tally.counts().failing(), 1);
        tally.record(&fate(0, Fate::Handled));
        assert_eq!(tally.counts().failing(), 0);
        assert_eq!(tally.counts().handled, 1);
    }

    #[test]
    fn the_waves_stop_on_the_latest_window_only() {
        let plan = ReplayPlan::new(2, 0.2).unwrap().window(10).unwrap();
        let mut tally = FateTally::default();
        // 20 failures long ago, then 10 handled: the window sees 10 handled.
        for seq in 0..30 {
            tally.sent(seq);
            tally.record(&fate(
                seq,
                if seq < 20 {
                    Fate::DeadLettered
                } else {
                    Fate::Handled
                },
            ));
        }
        assert_eq!(tally.waves(&plan), ReplayVerdict::Go);
        for seq in 30..33 {
            tally.sent(seq);
            tally.record(&fate(seq, Fate::Retrying));
        }
        assert_eq!(
            tally.waves(&plan),
            ReplayVerdict::Stop { failing: 3, of: 10 }
        );
        assert_eq!(tally.top_errors(3), vec![("db down".to_owned(), 23)]);
    }

    proptest! {
        /// The canary stops exactly when the failures exceed the threshold.
        #[test]
        fn the_canary_stops_exactly_above_the_threshold(
            fates in proptest::collection::vec(any::<bool>(), 1..200),
            percent in 0u32..100,
        ) {
            let plan = ReplayPlan::new(fates.len() as u32, f64::from(percent) / 100.0).unwrap();
            let mut tally = FateTally::default();
            for (seq, failed) in fates.iter().enumerate() {
                tally.sent(seq as u64);
                tally.record(&fate(seq as u64, if *failed { Fate::DeadLettered } else { Fate::Handled }));
            }
            let failing = fates.iter().filter(|f| **f).count() as u64;
            let stop = failing * 100 > u64::from(percent) * fates.len() as u64;
            let verdict = tally.canary(&plan, fates.len() as u64, false);
            prop_assert_eq!(matches!(verdict, ReplayVerdict::Stop { .. }), stop);
            prop_assert_eq!(tally.counts().failing(), failing);
        }
    }
}
