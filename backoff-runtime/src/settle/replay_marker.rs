//! The marker a replay job puts on each copy it sends (`x-replay-job`,
//! `x-replay-seq`), read back: by the consumer that records the copy's
//! fate, and by the job that finds its own copies dead-lettered again.

use lapin::types::FieldTable;
use rabbit_backoff_core::{HeaderValue, headers};

use crate::transport::header_view;

/// The replay job and copy number a delivery's headers carry, if any.
pub fn replay_marker(table: &FieldTable) -> Option<(String, u64)> {
    let job = match header_view(table.inner().get(headers::REPLAY_JOB)?) {
        HeaderValue::Str(job) => job.to_owned(),
        _ => return None,
    };
    let seq = match header_view(table.inner().get(headers::REPLAY_SEQ)?) {
        HeaderValue::Int(seq) => u64::try_from(seq).ok()?,
        _ => return None,
    };
    Some((job, seq))
}
