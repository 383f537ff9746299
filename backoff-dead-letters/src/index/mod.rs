//! The dead-letter index beside a dead-letter queue, and its read: the
//! entries' stream (`index_stream`), read over AMQP 0-9-1 or RabbitMQ's
//! stream protocol (`stream_protocol`, whose messages `stream_message`
//! decodes), each message a batch of entries (`index_entries`), written by
//! the operator tools as by the consumer (`entry_writer`); the checkpoints
//! that let a read start part-way (`checkpoint`, `checkpoint_note`), the
//! tombstones of what left the queue (`tombstones`), and why and how a read
//! was made or fell back to a pass (`index_fallback`, `index_protocol`).

pub(crate) mod checkpoint;
pub(crate) mod checkpoint_note;
pub(crate) mod entry_writer;
#[allow(clippy::module_inception)]
pub(crate) mod index;
pub(crate) mod index_entries;
pub(crate) mod index_fallback;
pub(crate) mod index_protocol;
pub(crate) mod index_stream;
pub(crate) mod stream_message;
pub(crate) mod stream_protocol;
pub(crate) mod tombstones;
