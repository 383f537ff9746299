//! Keeping every copy the framework publishes inside one AMQP frame.
//!
//! A message's properties and headers travel in a single content-header frame.
//! A copy that no longer fits (the original's headers plus the failure headers
//! the framework adds) makes the broker close the whole connection with
//! `FRAME_ERROR`, and every consumer on it goes down with the message. So the
//! runtime measures each copy before publishing it, and when it is too large
//! shrinks what the framework owns, in this order:
//!
//! 1. the oldest `x-replay-history` entries (`x-replay-count` still counts
//!    every replay, so the number dropped stays known);
//! 2. `x-error`, cut down to no less than [`MIN_ERROR_LEN`] bytes;
//! 3. `x-original-queue`, `x-original-exchange` and `x-original-routing-key`.
//!
//! If the copy still does not fit, the user's own headers are too large and
//! no copy is made at all: the original is rejected without requeue, and the
//! work queue's dead-letter exchange moves it into the dead-letter queue
//! inside the broker, headers intact.
//!
//! The broker adds headers of its own after a copy is published: `x-death`
//! (and `x-first-death-*`, and from 3.13 `x-last-death-*`) whenever it
//! dead-letters a message, and a quorum queue's `x-delivery-count` on
//! redelivery. A message pushed over the frame size that way can no longer be
//! delivered to any client: the broker sends the frame and the client cannot
//! read it. So every copy leaves [`broker_headroom`] free, and a message too
//! close to the limit for the broker's own dead-lettering gets a dead-letter
//! copy without its largest headers instead (reason `oversized`,
//! [`headers_to_drop`]).

/// Bytes of a frame that are not payload: type (1), channel (2), size (4) and
/// the end marker (1). RabbitMQ refuses a frame whose payload exceeds
/// `frame_max` minus this.
pub const FRAME_OVERHEAD: usize = 8;

/// The deepest nesting of header tables and arrays the framework copies or
/// shows. A deeper message is dead-lettered without a copy; operations show
/// its headers cut at this depth. Real headers nest a few levels (`x-death`
/// is three).
pub const MAX_HEADER_DEPTH: usize = 64;

/// The shortest `x-error` that shrinking a copy leaves.
pub const MIN_ERROR_LEN: usize = 256;

/// What a copy is made of, in encoded bytes, as far as shrinking it goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CopySizes {
    /// The whole content-header payload: class, weight, body size, property
    /// flags and every property, headers included.
    pub total: usize,
    /// Each `x-replay-history` entry's encoded size, oldest first.
    pub history: Vec<usize>,
    /// The length of `x-error`'s text, 0 when there is none.
    pub error: usize,
    /// The encoded size of the `x-original-*` headers, names included.
    pub original: usize,
}

impl CopySizes {
    /// A copy whose content-header payload takes `total` bytes, with no
    /// `x-replay-history`, `x-error` or `x-original-*` headers until the
    /// `with_*` methods add their sizes.
    ///
    /// ```
    /// use rabbit_backoff_core::{CopySizes, Fit, fit_copy};
    ///
    /// let sizes = CopySizes::new(1_000).with_error(600);
    /// assert_eq!(fit_copy(&sizes, 2_000), Fit::AsIs);
    /// ```
    pub fn new(total: usize) -> Self {
        CopySizes {
            total,
            ..CopySizes::default()
        }
    }

    /// The same copy, whose `x-replay-history` entries take these encoded
    /// sizes, oldest first.
    pub fn with_history(mut self, history: Vec<usize>) -> Self {
        self.history = history;
        self
    }

    /// The same copy, whose `x-error` text is `error` bytes long.
    pub fn with_error(mut self, error: usize) -> Self {
        self.error = error;
        self
    }

    /// The same copy, whose `x-original-*` headers take `original` encoded
    /// bytes, names included.
    pub fn with_original(mut self, original: usize) -> Self {
        self.original = original;
        self
    }
}

/// How to shrink a copy so that it fits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShrinkPlan {
    /// Drop this many of the oldest `x-replay-history` entries.
    pub drop_history: usize,
    /// Cut `x-error` to at most this many bytes.
    pub error_len: Option<usize>,
    /// Drop the `x-original-*` headers.
    pub drop_original: bool,
}

/// Whether a copy fits in one frame, and how.
///
/// Exhaustive: only the runtime, pinned to this crate exactly, matches it
/// (services do not see it), so a new variant is a compile error there
/// rather than a branch for a variant it does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// It fits as it is.
    AsIs,
    /// It fits once shrunk by the plan.
    Shrunk(ShrinkPlan),
    /// It cannot fit: even with everything the framework owns shrunk, its
    /// content header takes `size` bytes where `limit` are allowed.
    TooLarge {
        /// The content header's size after every shrinking step.
        size: usize,
        /// The largest content header allowed.
        limit: usize,
    },
}

/// Room to leave in a copy for the headers the broker may add to it later,
/// when it dead-letters the copy out of `queue` (which it reached through
/// `exchange` with `routing_key`): an `x-death` entry and the
/// `x-first-death-*`/`x-last-death-*` headers name the queue and exchange
/// three times and the routing key twice, around some 350 bytes of fixed
/// names and values.
///
/// ```
/// use rabbit_backoff_core::broker_headroom;
/// assert_eq!(broker_headroom("orders.retry_5000ms", "orders.retry", "orders.retry_5000ms"), 512 + 3 * 31 + 2 * 19);
/// ```
pub fn broker_headroom(queue: &str, exchange: &str, routing_key: &str) -> usize {
    512 + 3 * (queue.len() + exchange.len()) + 2 * routing_key.len()
}

/// Room to leave in a copy to a dead-letter queue, which dead-letters
/// nothing further: a quorum queue's `x-delivery-count`, which it adds when a
/// peek returns the message.
pub const DEAD_LETTER_HEADROOM: usize = 64;

/// Which of the user's headers a copy leaves out to shed `excess` bytes:
/// the largest first, as few as possible. `sizes` are the headers' encoded
/// sizes; the answer holds their indices.
///
/// ```
/// use rabbit_backoff_core::headers_to_drop;
/// assert_eq!(headers_to_drop(&[10, 120_000, 300, 5_000], 2_000), vec![1]);
/// assert_eq!(headers_to_drop(&[10, 300], 1_000), vec![1, 0]);
/// ```
pub fn headers_to_drop(sizes: &[usize], excess: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let mut shed = 0;
    order
        .into_iter()
        .take_while(|&i| {
            let more = shed < excess;
            shed += sizes[i];
            more
        })
        .collect()
}

/// The largest content-header payload a connection with `frame_max` accepts.
///
/// ```
/// assert_eq!(rabbit_backoff_core::header_limit(131_072), 131_064);
/// ```
pub fn header_limit(frame_max: u32) -> usize {
    (frame_max as usize).saturating_sub(FRAME_OVERHEAD)
}

/// Decides how to make a copy of `sizes` fit in `limit` bytes of content
/// header (see [`header_limit`] and [`broker_headroom`]), shrinking as
/// little as possible, in the order of the module's docs.
///
/// ```
/// use rabbit_backoff_core::{CopySizes, Fit, ShrinkPlan, fit_copy};
///
/// let sizes = CopySizes::new(143_000)
///     .with_history(vec![5_000, 5_000])
///     .with_error(4_096)
///     .with_original(80);
/// // Both history entries go, then x-error is cut by what is still over.
/// let Fit::Shrunk(plan) = fit_copy(&sizes, 131_064) else { panic!() };
/// assert_eq!(plan.drop_history, 2);
/// assert_eq!(plan.error_len, Some(4_096 - (143_000 - 10_000 - 131_064)));
/// assert!(!plan.drop_original);
/// ```
pub fn fit_copy(sizes: &CopySizes, limit: usize) -> Fit {
    if sizes.total <= limit {
        return Fit::AsIs;
    }
    let mut size = sizes.total;
    let mut plan = ShrinkPlan::default();
    for entry in &sizes.history {
        if size <= limit {
            break;
        }
        size -= (*entry).min(size);
        plan.drop_history += 1;
    }
    if size > limit && sizes.error > MIN_ERROR_LEN {
        let keep = sizes.error.saturating_sub(size - limit).max(MIN_ERROR_LEN);
        size -= sizes.error - keep;
        plan.error_len = Some(keep);
    }
    if size > limit && sizes.original > 0 {
        size -= sizes.original.min(size);
        plan.drop_original = true;
    }
    if size > limit {
        Fit::TooLarge { size, limit }
    } else {
        Fit::Shrunk(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FRAME: u32 = 131_072;

    #[test]
    fn a_small_copy_is_left_alone() {
        let sizes = CopySizes {
            total: 2_000,
            history: vec![500],
            error: 300,
            original: 60,
        };
        assert_eq!(fit_copy(&sizes, header_limit(FRAME)), Fit::AsIs);
    }

    #[test]
    fn drops_only_as_much_history_as_needed() {
        let sizes = CopySizes {
            total: header_limit(FRAME) + 100,
            history: vec![4_000, 4_000, 4_000],
            error: 4_096,
            original: 60,
        };
        assert_eq!(
            fit_copy(&sizes, header_limit(FRAME)),
            Fit::Shrunk(ShrinkPlan {
                drop_history: 1,
                ..ShrinkPlan::default()
            })
        );
    }

    #[test]
    fn user_headers_that_are_too_large_cannot_fit() {
        let sizes = CopySizes {
            total: 140_000,
            history: vec![],
            error: 4_096,
            original: 60,
        };
        let Fit::TooLarge { size, limit } = fit_copy(&sizes, header_limit(FRAME)) else {
            panic!("should not fit")
        };
        assert_eq!(limit, 131_064);
        assert_eq!(size, 140_000 - (4_096 - MIN_ERROR_LEN) - 60);
    }

    proptest! {
        #[test]
        fn dropping_sheds_enough_with_the_largest_first(
            sizes in proptest::collection::vec(0usize..50_000, 0..20),
            excess in 0usize..200_000,
        ) {
            let dropped = headers_to_drop(&sizes, excess);
            let shed: usize = dropped.iter().map(|&i| sizes[i]).sum();
            let total: usize = sizes.iter().sum();
            prop_assert!(shed >= excess.min(total));
            let smallest_dropped = dropped.iter().map(|&i| sizes[i]).min();
            for (i, size) in sizes.iter().enumerate() {
                if !dropped.contains(&i) {
                    prop_assert!(smallest_dropped.is_none_or(|s| *size <= s));
                }
            }
            // Without its last pick, not enough would be shed.
            if let Some((_, rest)) = dropped.split_last() {
                prop_assert!(rest.iter().map(|&i| sizes[i]).sum::<usize>() < excess);
            }
        }

        #[test]
        fn a_plan_always_fits_and_follows_the_order(
            total in 0usize..300_000,
            history in proptest::collection::vec(1usize..20_000, 0..12),
            error in 0usize..5_000,
            original in 0usize..400,
        ) {
            let owned = history.iter().sum::<usize>() + error + original;
            prop_assume!(owned <= total);
            let sizes = CopySizes { total, history: history.clone(), error, original };
            let limit = header_limit(FRAME);
            match fit_copy(&sizes, header_limit(FRAME)) {
                Fit::AsIs => prop_assert!(total <= limit),
                Fit::Shrunk(plan) => {
                    let dropped: usize = history[..plan.drop_history].iter().sum();
                    let cut = plan.error_len.map_or(0, |keep| error - keep);
                    let after = total - dropped - cut - if plan.drop_original { original } else { 0 };
                    prop_assert!(after <= limit);
                    // A later step only when the earlier ones were not enough.
                    if plan.error_len.is_some() {
                        prop_assert_eq!(plan.drop_history, history.len());
                        prop_assert!(plan.error_len.unwrap() >= MIN_ERROR_LEN);
                    }
                    if plan.drop_original {
                        prop_assert!(plan.error_len.is_none_or(|k| k == MIN_ERROR_LEN) );
                    }
                    // No history entry dropped beyond the one that made it fit.
                    if plan.drop_history > 0 {
                        let before_last: usize = history[..plan.drop_history - 1].iter().sum();
                        prop_assert!(total - before_last > limit);
                    }
                }
                Fit::TooLarge { size, .. } => {
                    prop_assert!(size > limit);
                    let shrinkable = history.iter().sum::<usize>()
                        + error.saturating_sub(MIN_ERROR_LEN)
                        + original;
                    prop_assert_eq!(size, total - shrinkable);
                }
            }
        }
    }
}
