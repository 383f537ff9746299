//! The scenarios: which messages of a run succeed, fail once, or fail for
//! good.

use crate::work::Kind;

#[derive(Clone, Copy)]
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    pub(crate) what: &'static str,
    pub(crate) kind: fn(u64) -> Kind,
}

impl Scenario {
    /// How many of the messages `0..n` fail for good: the dead letters a
    /// run of `n` ends with.
    pub(crate) fn permanent_among(self, n: u64) -> usize {
        (0..n)
            .filter(|&id| (self.kind)(id) == Kind::Permanent)
            .count()
    }
}

pub(crate) const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "S1",
        what: "every message succeeds",
        kind: |_| Kind::Ok,
    },
    Scenario {
        name: "S2",
        what: "every message fails permanently",
        kind: |_| Kind::Permanent,
    },
    Scenario {
        name: "S3",
        what: "every message fails once, then succeeds",
        kind: |_| Kind::TransientOnce,
    },
    Scenario {
        name: "S4",
        what: "90% succeed, 8% fail once, 2% fail permanently",
        kind: |id| match id % 100 {
            0..=89 => Kind::Ok,
            90..=97 => Kind::TransientOnce,
            _ => Kind::Permanent,
        },
    },
];
