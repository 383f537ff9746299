//! AMQP 0-9-1 over lapin, for a real RabbitMQ: the [`AmqpTransport`] to a
//! node or a cluster's list of them, its [`AmqpConnection`]s on the
//! runtime's own sockets (under the [frame guard](frame_guard), which keeps
//! headers nested too deeply for lapin out of its parser), their confirm
//! channels and deliveries. A connection pairs itself with an AMQP 1.0
//! connection to the same node, its [partner](partner), for the channels
//! whose deliveries can be held back.
mod acker;
mod channel;
mod close;
mod connection;
pub(crate) mod frame_guard;
mod lapin_error;
mod node_connection;
mod nodes;
mod partner;
mod server_greeting;
mod transport;
mod until_lost;

pub use connection::AmqpConnection;
pub use frame_guard::MAX_FRAME_SIZE;
pub(crate) use partner::HOLDING_CHANNELS_BUILT;
pub use transport::AmqpTransport;
