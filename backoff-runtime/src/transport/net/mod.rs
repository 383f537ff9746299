//! The network under both protocols: the runtime's own sockets (TCP, and
//! TLS for `amqps://`), the cheap TCP probes of nodes between reconnection
//! attempts, and addresses without their passwords.
pub(crate) mod connector;
pub(crate) mod node_probe;
pub(crate) mod redact;
#[cfg(feature = "tls")]
pub(crate) mod tls;
