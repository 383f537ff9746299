//! [`QueueInfo`]: a queue's depth, as a declaration or a passive check
//! reports it.

/// A queue's depth, as a declaration or a passive check reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueInfo {
    /// Messages ready for delivery.
    pub messages: u32,
    /// Consumers attached.
    pub consumers: u32,
}

impl QueueInfo {
    /// A queue with `messages` ready and `consumers` attached, as a
    /// transport reports it.
    ///
    /// ```
    /// use rabbit_backoff::transport::QueueInfo;
    ///
    /// let info = QueueInfo::new(3, 1);
    /// assert_eq!((info.messages, info.consumers), (3, 1));
    /// ```
    pub fn new(messages: u32, consumers: u32) -> Self {
        QueueInfo {
            messages,
            consumers,
        }
    }
}
