//! Operating failures: dead-letter operations and status.

pub(crate) mod checkpoint_note;
pub(crate) mod dead_letter_filter;
pub(crate) mod dead_letter_group;
pub(crate) mod dead_letter_index;
pub(crate) mod dead_letter_key;
pub(crate) mod dead_letter_message;
pub(crate) mod dead_letter_pass;
pub(crate) mod dead_letter_record;
pub(crate) mod dead_letter_tombstones;
pub(crate) mod dlq;
pub(crate) mod group_report;
pub(crate) mod index_checkpoint;
pub(crate) mod index_fallback;
pub(crate) mod index_stream;
pub(crate) mod message_edit;
pub(crate) mod purge_report;
pub(crate) mod retry_tier;
pub(crate) mod status;
