//! Operating a dead-letter queue: [`Dlq`](dlq::Dlq) and what it reads and
//! writes. A pass over the queue (`pass`) or a read of the index beside it
//! (`index`, `index_stream`, `stream_protocol`, `stream_message`, `checkpoint`,
//! `tombstones`), the filters and
//! groups they share (`filter`, `group`, `key`, `message`, `group_report`),
//! the records of export and import (`record`) and of an edit (`edit`), and
//! the dead letters of each group over time (`timeline`).

pub(crate) mod checkpoint;
pub(crate) mod checkpoint_note;
pub(crate) mod dlq;
pub(crate) mod edit;
pub(crate) mod export;
pub(crate) mod filter;
pub(crate) mod group;
pub(crate) mod group_report;
pub(crate) mod index;
pub(crate) mod index_fallback;
pub(crate) mod index_protocol;
pub(crate) mod index_stream;
pub(crate) mod key;
pub(crate) mod message;
pub(crate) mod pass;
pub(crate) mod pass_queue;
pub(crate) mod purge;
pub(crate) mod record;
pub(crate) mod replay;
pub(crate) mod replay_options;
pub(crate) mod report;
pub(crate) mod rotation;
pub(crate) mod stream_message;
pub(crate) mod stream_protocol;
pub(crate) mod timeline;
pub(crate) mod tombstones;
