//! [`QueueInfo`]: a queue's depth, as a declaration or a passive check
//! reports it.

/// A queue's depth, as a declaration or a passive check reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueInfo {
    /// Messages ready for delivery.
    pub messages: u32,
    /// Consumers attached.
    pub consumers: u32,
}
