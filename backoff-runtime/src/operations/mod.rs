//! Operating failures: dead-letter operations, status, and publishing.

pub(crate) mod dead_letter_filter;
pub(crate) mod dead_letter_message;
pub(crate) mod dlq;
pub(crate) mod publisher;
pub(crate) mod status;
