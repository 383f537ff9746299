//! [`ReplayGate`]: what a watched replay says (and records) before each
//! copy it sends, and what it records when the broker refused one.

use futures_util::future::BoxFuture;
use lapin::BasicProperties;
use rabbit_backoff_runtime::Error;

/// What a watched replay does with the next matching message.
pub(crate) enum Admit {
    /// Send it as the job's copy number `seq`.
    Send(u64),
    /// Remove it without a copy: the job's copy of it was confirmed, and
    /// its removal was lost.
    Remove,
    /// Leave it in the queue, where it is: the job may have sent it (its
    /// copy was recorded, not confirmed, before the job stopped),
    /// or it is one of the job's own copies, dead-lettered again.
    Keep,
    /// Send nothing more in this pass: every other message stays.
    Stop,
}

/// The watch a replay job keeps over a pass that replays.
pub(crate) trait ReplayGate: Send {
    /// The job's id, which each copy carries.
    fn job(&self) -> &str;

    /// Whether to send the message with `properties` (its dead-letter key
    /// is `key`); a copy it admits is recorded as sent before it is
    /// published, so that it is never sent twice.
    fn admit<'a>(
        &'a mut self,
        key: u64,
        properties: &'a BasicProperties,
    ) -> BoxFuture<'a, Result<Admit, Error>>;

    /// Records that copy `seq` of the message with dead-letter key `key`
    /// was not sent after all: the broker refused it.
    fn withdrawn(&mut self, key: u64, seq: u64) -> BoxFuture<'_, Result<(), Error>>;

    /// Records that the broker confirmed the copy of the message with
    /// dead-letter key `key` (before its original is removed).
    fn confirmed(&mut self, key: u64) -> BoxFuture<'_, Result<(), Error>>;

    /// Writes what [`confirmed`](Self::confirmed) holds back: at the end
    /// of the pass.
    fn flush(&mut self) -> BoxFuture<'_, Result<(), Error>>;
}
