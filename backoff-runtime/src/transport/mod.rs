//! What the framework asks of a broker, and nothing more: the seam between
//! the runtime and the AMQP client.
//!
//! [`Transport`] connects; a [`Connection`] opens channels; a [`Channel`] (always
//! in publisher-confirm mode) declares, checks, consumes, gets, publishes and
//! closes; a connection also opens the channels whose deliveries can be held
//! back ([`Connection::open_holding_channel`]). [`AmqpTransport`] implements
//! it for a real RabbitMQ; the `rabbit-backoff-testing` crate
//! (`rabbit_backoff::testing`) implements it in memory, with the same
//! semantics.
//!
//! The folder is laid out as the seam and its implementations: the seam's
//! vocabulary here, protocol-neutral; `amqp091/`, AMQP 0-9-1 over lapin;
//! `amqp1/` (feature `amqp1`), the consuming side of AMQP 1.0 over
//! fe2o3-amqp, which only an AMQP 0-9-1 connection opens, as its partner;
//! `net/`, the sockets, TLS and probes under both.
//!
//! A [`Connection`] says when it is [`lost`](Connection::lost): the client has
//! seen its socket reset or its node die. Operations on it then fail at once
//! rather than wait for an answer that cannot come.
//!
//! Messages keep lapin's data model ([`BasicProperties`](lapin::BasicProperties), field tables and
//! values, re-exported as `rabbit_backoff::lapin`), so both implementations
//! carry exactly what goes on the wire.
mod acker;
mod amqp091;
#[cfg(feature = "amqp1")]
mod amqp1;
pub(crate) mod amqp_values;
mod channel;
mod confirm;
mod connection;
mod connection_loss;
mod delivery;
mod modification;
pub(crate) mod net;
mod publication;
mod queue_info;
mod stream_offset;
mod tls_error;
// Named after the trait it holds, as the folder is.
#[allow(clippy::module_inception)]
mod transport;
mod transport_error;

pub use acker::{Acker, Settle};
pub use amqp_values::header_view;
pub use amqp091::{AmqpConnection, AmqpTransport, MAX_FRAME_SIZE};
pub(crate) use amqp091::{HOLDING_CHANNELS_BUILT, frame_guard};
pub use channel::Channel;
pub use confirm::{Confirm, PendingConfirm};
pub use connection::Connection;
pub use connection_loss::{Lost, LostSignal};
pub use delivery::{Deliveries, Delivery};
pub use modification::{AnnotationValue, Modification};
pub use publication::Publication;
pub use queue_info::QueueInfo;
pub use stream_offset::StreamOffset;
pub use tls_error::{TlsError, Trusted};
pub use transport::Transport;
pub use transport_error::{NOT_FOUND, PRECONDITION_FAILED, RESOURCE_LOCKED, TransportError};
