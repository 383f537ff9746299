//! The runtime's own requests to a broker, made over the transport and
//! failing with the runtime's [`Error`](crate::Error), which names the
//! queue or exchange involved: a confirm channel for work on one queue,
//! declaring or checking a consumer's topology, inspecting a queue or an
//! exchange, asking whether the broker applies delayed retries, writing
//! the dead-letter index, and
//! watching that the connection's node still reaches its cluster's majority.

pub(crate) mod confirm_channel;
pub(crate) mod declare;
pub(crate) mod held_retry_probe;
pub(crate) mod index_entry;
pub(crate) mod index_writer;
pub(crate) mod inspect;
pub(crate) mod metadata_watch;
