//! Why a dedupe store could not answer. Re-exported as `dedupe::StoreError`,
//! beside the stores; defined here, beside `error.rs`, because the
//! runtime's [`Error::DedupeStore`](crate::Error::DedupeStore) carries it
//! and `error.rs` sits below the dedupe layer (whose outbox publishes
//! [`Outgoing`](crate::Outgoing) messages, which fail with `Error`).

/// Why a dedupe store could not answer. The delivery that asked is requeued
/// after a pause, never handled without its key and never lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store's address cannot be used.
    #[error("invalid dedupe store address `{address}`: {reason}")]
    Address {
        /// The address, without a password.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store did not answer, or failed an operation.
    #[error("the dedupe store at {store} failed {action}: {reason}")]
    Unavailable {
        /// Where the store is, without a password.
        store: String,
        /// What the runtime asked of it.
        action: &'static str,
        /// The client's words.
        reason: String,
    },
}
