//! The work, identical for every side: the messages of a run, what each
//! side records of them, and the framework's consumer.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Instant;

use rabbit_backoff::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    Ok,
    Permanent,
    TransientOnce,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Msg {
    pub(crate) id: u64,
    pub(crate) kind: Kind,
}

/// What each run records: per id, how often it was handled successfully.
pub(crate) struct Tally {
    pub(crate) handled: Vec<AtomicU8>,
    pub(crate) ok: AtomicUsize,
    pub(crate) first: OnceLock<Instant>,
}

impl Tally {
    pub(crate) fn new(n: usize) -> Self {
        Tally {
            handled: (0..n).map(|_| AtomicU8::new(0)).collect(),
            ok: AtomicUsize::new(0),
            first: OnceLock::new(),
        }
    }

    pub(crate) fn seen(&self) {
        self.first.get_or_init(Instant::now);
    }

    pub(crate) fn handled(&self, id: u64) {
        if let Some(slot) = self.handled.get(id as usize)
            && slot.fetch_add(1, Ordering::Relaxed) == 0
        {
            self.ok.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[derive(Debug, thiserror::Error, Classify)]
pub(crate) enum BenchError {
    #[error("transient failure")]
    Transient,
    #[permanent]
    #[error("permanent failure")]
    Permanent,
}

#[backoff_consumer(queue = "bench", delays = "1ms")]
pub(crate) async fn framework(
    msg: Msg,
    ctx: &Context,
    tally: State<Tally>,
) -> Result<(), BenchError> {
    tally.seen();
    match msg.kind {
        Kind::Permanent => Err(BenchError::Permanent),
        Kind::TransientOnce if ctx.retry_count() == 0 => Err(BenchError::Transient),
        _ => {
            tally.handled(msg.id);
            Ok(())
        }
    }
}
