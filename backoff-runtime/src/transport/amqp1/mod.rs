//! Consuming over AMQP 1.0 (RabbitMQ 4.3 and later) with fe2o3-amqp,
//! behind the same [`Connection`](super::Connection) and
//! [`Channel`](super::Channel) as AMQP 0-9-1: a channel is a session, a
//! consumer a receiver link on `/queues/<name>`, and a delivery settles as
//! AMQP 1.0's outcomes, `modified` included (docs/amqp-1.0.md). Declaring
//! and publishing stay on AMQP 0-9-1: an AMQP 1.0 connection is only ever
//! opened by an AMQP 0-9-1 one, as its partner, for the channels whose
//! deliveries can be held back.
mod acker;
mod address;
mod attach;
mod channel;
mod command;
mod connection;
mod link;
mod message;
mod values;

pub(crate) use connection::connect;
