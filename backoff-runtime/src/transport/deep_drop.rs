//! Dropping values that may nest tens of thousands of levels deep (a
//! hostile message's headers) without overflowing a task's stack.

use rabbit_backoff_core::MAX_HEADER_DEPTH;

use super::Delivery;
use super::shape::header_depth;

/// Stack of the thread that drops a deeply nested value: dropping recurses
/// once per level, like parsing (see `vendor/lapin/PATCHED.md`).
const DEEP_DROP_STACK: usize = 512 << 20;

/// Drops `value` on a thread with a stack large enough for the deepest
/// headers a frame can hold, instead of on a task's small one. If no such
/// thread can be started, the value is leaked rather than risk an abort.
pub(crate) fn drop_deep<T: Send + 'static>(value: T) {
    let (sender, receiver) = std::sync::mpsc::channel::<T>();
    let spawned = std::thread::Builder::new()
        .name("rabbit-backoff-drop".into())
        .stack_size(DEEP_DROP_STACK)
        .spawn(move || drop(receiver.recv()));
    match spawned {
        Ok(_) => {
            // The receiver lives until the thread has dropped the value.
            let _ = sender.send(value);
        }
        Err(e) => {
            tracing::error!(
                "cannot start a thread to drop a deeply nested message ({e}); leaking it"
            );
            if let Err(std::sync::mpsc::SendError(value)) = sender.send(value) {
                std::mem::forget(value);
            }
        }
    }
}

/// Drops a delivery, on a large stack when its headers nest more than
/// [`MAX_HEADER_DEPTH`] levels.
pub(crate) fn release(delivery: Delivery) {
    if header_depth(&delivery.properties) > MAX_HEADER_DEPTH {
        drop_deep(delivery);
    }
}

/// A delivery that is [`release`]d however the code holding it ends, early
/// returns and errors included.
pub(crate) struct Released(Option<Delivery>);

impl Released {
    pub(crate) fn new(delivery: Delivery) -> Self {
        Released(Some(delivery))
    }
}

impl std::ops::Deref for Released {
    type Target = Delivery;
    fn deref(&self) -> &Delivery {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        if let Some(delivery) = self.0.take() {
            release(delivery);
        }
    }
}
