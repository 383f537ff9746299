//! What the framework asks of a broker, and nothing more: the seam between
//! the runtime and the AMQP client.
//!
//! [`Transport`] connects; a [`Connection`] opens channels; a [`Channel`] (always
//! in publisher-confirm mode) declares, checks, consumes, gets, publishes and
//! closes. [`amqp`] implements it over lapin for a real RabbitMQ; the
//! `rabbit-backoff-testing` crate (`rabbit_backoff::testing`) implements it in
//! memory, with the same semantics.
//!
//! A [`Connection`] says when it is [`lost`](Connection::lost): the client has
//! seen its socket reset or its node die. Operations on it then fail at once
//! rather than wait for an answer that cannot come.
//!
//! Messages keep lapin's data model ([`BasicProperties`](lapin::BasicProperties), field tables and
//! values, re-exported as `rabbit_backoff::lapin`), so both implementations
//! carry exactly what goes on the wire.
mod acker;
pub mod amqp;
#[cfg(feature = "amqp1")]
pub(crate) mod amqp1;
pub(crate) mod amqp_values;
mod channel;
mod confirm;
mod connection;
mod connection_loss;
mod connector;
mod delivery;
pub(crate) mod frame_guard;
pub(crate) mod lapin_error;
mod modification;
pub(crate) mod node_probe;
mod publication;
mod queue_info;
pub(crate) mod redact;
mod server_greeting;
pub mod stream_offset;
#[cfg(feature = "tls")]
mod tls;
pub mod tls_error;
// Named after the trait it holds, as the folder is.
#[allow(clippy::module_inception)]
mod transport;
mod transport_error;

pub use acker::{Acker, Settle};
pub use amqp::AmqpTransport;
pub use amqp_values::header_view;
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
pub use transport_error::{NOT_FOUND, PRECONDITION_FAILED, TransportError};
