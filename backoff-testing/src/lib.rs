//! An in-memory RabbitMQ for tests of rabbit-backoff consumers, used as
//! `rabbit_backoff::testing` (the facade's feature `testing`): the same
//! [`Transport`](rabbit_backoff_runtime::transport::Transport) seam as the real broker, with
//! RabbitMQ 3.10's semantics for everything the framework relies on, on
//! tokio's clock.
//!
//! - **Exchanges**: direct, fanout, topic (`*` one word, `#` zero or more),
//!   headers, and the default exchange `""` (the queue named by the routing
//!   key). Publishing to a missing exchange closes the channel with
//!   `NOT_FOUND`; redeclaring with another type, with `PRECONDITION_FAILED`.
//! - **Queues**: classic or quorum; `x-message-ttl` (and per-message
//!   `expiration`) expire messages **at the head only**, by the clock;
//!   `x-dead-letter-exchange` / `x-dead-letter-routing-key` dead-letter
//!   expired, rejected, overflowing (`x-max-length`, drop-head) and, for
//!   quorum queues, over-delivered (`x-delivery-limit`) messages with the
//!   `x-death` header RabbitMQ writes; `x-overflow = reject-publish` nacks
//!   publishes to a full queue. A redeclaration with other arguments fails
//!   with RabbitMQ's exact `inequivalent arg` text.
//! - **Consumers**: round robin, per-consumer prefetch, deliveries in queue
//!   order, `redelivered` on returned messages; a classic queue puts a
//!   requeued message back at its original position, a quorum queue at the
//!   back (or, with a delivery limit or from a closing channel, ahead of the
//!   rest, counting `x-delivery-count`).
//! - **Publisher confirms**: `Ack` once routed, `Returned` when unroutable
//!   (publishes are mandatory), `Nack` from a full reject-publish queue.
//! - **Faults** on demand: [`TestBroker::nack_publishes_to`],
//!   [`TestBroker::return_publishes_to`], [`TestBroker::fail_next_publishes`],
//!   [`TestBroker::close_channels`], [`TestBroker::close_connections`].
//!
//! Under `#[tokio::test(start_paused = true)]`, [`TestBroker::run_until_idle`]
//! plays out a whole retry schedule (5s, 15s, 60s) in milliseconds.
//!
//! ```
//! use rabbit_backoff::ExchangeKind;
//! use rabbit_backoff::topology::{Argument, Binding, QueueDecl};
//! use rabbit_backoff::testing::TestBroker;
//! use rabbit_backoff::transport::Transport;
//! use futures_util::StreamExt;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), rabbit_backoff::transport::TransportError> {
//! let broker = TestBroker::new();
//! let channel = broker.connect().await?.open_channel().await?;
//! channel.declare_exchange("orders", ExchangeKind::Direct).await?;
//! let work = QueueDecl::new("orders");
//! channel.declare_queue(&work).await?;
//! channel.bind_queue(&Binding::new("orders", "orders", "orders")).await?;
//! // A retry queue: after 5 s, messages go back to the work queue.
//! let retry = QueueDecl::new("orders.retry_5000ms")
//!     .with_argument("x-message-ttl", Argument::Int(5_000))
//!     .with_argument("x-dead-letter-exchange", Argument::Str("".into()))
//!     .with_argument("x-dead-letter-routing-key", Argument::Str("orders".into()));
//! channel.declare_queue(&retry).await?;
//!
//! broker.publish_json("", "orders.retry_5000ms", &"order 1").await;
//! let mut deliveries = channel.consume("orders").await?;
//! let delivery = deliveries.stream.next().await.unwrap()?;   // 5 s later, virtually
//! assert_eq!(delivery.routing_key, "orders");
//! delivery.acker.ack().await?;
//! broker.run_until_idle().await;
//! assert_eq!(broker.queue_depth("orders"), 0);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod broker_shared;
mod channel;
mod channel_kind;
mod connection;
mod death;
mod exchange;
mod faults;
mod idle_timeout;
mod lock;
mod message;
mod queue;
mod queue_config;
mod release;
mod replies;
mod set_aside_headers;
mod settlement;
mod stored_message;
mod test_broker;

pub use death::Death;
pub use idle_timeout::{QueueActivity, StillBusy};
pub use message::Message;
pub use release::Release;
pub use test_broker::{IDLE_LIMIT, TestBroker};
