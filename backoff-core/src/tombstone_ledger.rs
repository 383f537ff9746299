//! Which entries of the dead-letter index the tombstones cancel, when the
//! index's entries are read in several ranges at once.

use std::collections::HashMap;

/// The tombstones of the dead-letter index left to cancel entries, per
/// key, as the ranges of a read are taken back in the stream's order.
///
/// The rule it keeps is the one of a read from start to end: a tombstone
/// cancels the earliest entry of its key not yet cancelled. A range read
/// at the same time as the ones before it cannot know what they cancel, so
/// it assumes the tombstones as they were before them, counts per
/// tombstoned key how many entries it held (`seen`), and cancels the first
/// ones. [`settle`](Self::settle) then says whether that guess is what a
/// read from the start would have done; it is, unless a key has entries in
/// this range and in one before it (a dead letter written twice alike), and
/// then the range is read again assuming [`left`](Self::left).
///
/// ```
/// use std::collections::HashMap;
/// use rabbit_backoff_core::TombstoneLedger;
///
/// // One tombstone of key 7; the first range held an entry of it, the
/// // second one too.
/// let assumed = HashMap::from([(7, 1)]);
/// let mut ledger = TombstoneLedger::new(assumed.clone());
/// assert!(ledger.settle(&assumed, &HashMap::from([(7, 1)])));
/// // The second range guessed that its entry was cancelled: it is not.
/// assert!(!ledger.settle(&assumed, &HashMap::from([(7, 1)])));
/// // Read again with what is left, it keeps the entry.
/// let left = ledger.left().clone();
/// assert!(ledger.settle(&left, &HashMap::from([(7, 1)])));
/// assert_eq!(ledger.left().get(&7), Some(&0));
/// ```
#[derive(Debug, Clone, Default)]
pub struct TombstoneLedger {
    left: HashMap<u64, u32>,
}

impl TombstoneLedger {
    /// The tombstones of a read, per key, before its first range.
    pub fn new(tombstones: HashMap<u64, u32>) -> Self {
        TombstoneLedger { left: tombstones }
    }

    /// The tombstones not used yet, per key: what the next range cancels
    /// with when it is read alone.
    pub fn left(&self) -> &HashMap<u64, u32> {
        &self.left
    }

    /// Takes the next range, read assuming the tombstones `assumed`, which
    /// held `seen` entries of tombstoned keys: true when it cancelled what
    /// a read from the start cancels (then its tombstones are used), false
    /// when it must be read again assuming [`left`](Self::left) (nothing
    /// changes).
    pub fn settle(&mut self, assumed: &HashMap<u64, u32>, seen: &HashMap<u64, u32>) -> bool {
        let cancelled = |tombstones: &HashMap<u64, u32>, key: &u64, seen: u32| {
            tombstones.get(key).copied().unwrap_or(0).min(seen)
        };
        let exact = seen
            .iter()
            .all(|(key, &n)| cancelled(assumed, key, n) == cancelled(&self.left, key, n));
        if exact {
            for (key, &n) in seen {
                if let Some(left) = self.left.get_mut(key) {
                    *left -= (*left).min(n);
                }
            }
        }
        exact
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a read from the start cancels: per entry, whether it is.
    fn sequential(tombstones: &HashMap<u64, u32>, keys: &[u64]) -> Vec<bool> {
        let mut left = tombstones.clone();
        keys.iter()
            .map(|key| match left.get_mut(key) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            })
            .collect()
    }

    /// One range read assuming `assumed`: per entry whether cancelled, and
    /// the entries of tombstoned keys it held.
    fn range(assumed: &HashMap<u64, u32>, keys: &[u64]) -> (Vec<bool>, HashMap<u64, u32>) {
        let mut seen: HashMap<u64, u32> = HashMap::new();
        let cancelled = keys
            .iter()
            .map(|key| {
                let Some(&t) = assumed.get(key) else {
                    return false;
                };
                let n = seen.entry(*key).or_default();
                *n += 1;
                *n <= t
            })
            .collect();
        (cancelled, seen)
    }

    proptest! {
        #[test]
        fn ranges_settled_in_order_cancel_as_one_read_does(
            keys in proptest::collection::vec(0u64..12, 0..60),
            tombstones in proptest::collection::hash_map(0u64..12, 0u32..4, 0..8),
            cuts in proptest::collection::vec(0usize..60, 0..4),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(keys.len())).collect();
            cuts.push(0);
            cuts.push(keys.len());
            cuts.sort_unstable();
            let mut ledger = TombstoneLedger::new(tombstones.clone());
            let mut together = Vec::new();
            for pair in cuts.windows(2) {
                let part = &keys[pair[0]..pair[1]];
                let (mut cancelled, seen) = range(&tombstones, part);
                if !ledger.settle(&tombstones, &seen) {
                    let left = ledger.left().clone();
                    let again = range(&left, part);
                    prop_assert!(ledger.settle(&left, &again.1));
                    cancelled = again.0;
                }
                together.extend(cancelled);
            }
            prop_assert_eq!(together, sequential(&tombstones, &keys));
        }
    }
}
