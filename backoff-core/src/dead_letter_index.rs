//! Whether a consumer keeps the dead-letter index beside its dead-letter
//! queue (`dead_letter_index = "on"` or `"off"`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Whether a consumer keeps the dead-letter index: a stream beside the
/// dead-letter queue, to which the consumer writes a summary of every dead
/// letter ([`IndexFeed`](crate::IndexFeed) says how), so that `dlq groups`
/// and the console read a summary instead of every dead letter
/// ([`DeadLetterIndexDecl`](crate::DeadLetterIndexDecl)).
///
/// The index costs the broker one small stream message for many dead
/// letters (PERFORMANCE.md, "The dead-letter index"). `Off` saves that,
/// and loses only speed: `dlq groups` and the console read the whole
/// dead-letter queue each time, which takes seconds per 100 000 dead
/// letters instead of reading the index. Nothing about a dead letter is
/// lost; the queue holds each one whole.
///
/// ```
/// use rabbit_backoff::{ConsumerSpec, DeadLetterIndex};
/// use rabbit_backoff::topology::Topology;
///
/// assert_eq!("off".parse::<DeadLetterIndex>(), Ok(DeadLetterIndex::Off));
/// let mut spec = ConsumerSpec::new("orders", "5s".parse()?);
/// assert!(Topology::of(&spec).index_feed().is_some());
/// spec.dead_letter_index = DeadLetterIndex::Off;
/// assert!(Topology::of(&spec).index_feed().is_none());
/// # Ok::<(), rabbit_backoff::DelayError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DeadLetterIndex {
    /// Keep the index beside the dead-letter queue (the default): the
    /// consumer writes each dead letter's entry to it, on every topology
    /// (see [`Topology::index_feed`](crate::Topology::index_feed)).
    #[default]
    On,
    /// Declare no index, and delete the one an earlier declaration of the
    /// same consumer left, so that no reader takes its stale summary for
    /// the queue's.
    Off,
}

impl DeadLetterIndex {
    /// The attribute value: `on` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterIndex::On => "on",
            DeadLetterIndex::Off => "off",
        }
    }
}

impl fmt::Display for DeadLetterIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DeadLetterIndex {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "on" => Ok(DeadLetterIndex::On),
            "off" => Ok(DeadLetterIndex::Off),
            other => Err(format!(
                "`{other}` is not a dead-letter index setting; write \"on\" (a stream beside the dead-letter queue that `dlq groups` reads, the default) or \"off\" (no index: the broker writes each dead letter once, and `dlq groups` reads the whole queue)"
            )),
        }
    }
}
