//! [`Channel`]: one channel in publisher-confirm mode, and every operation
//! the framework makes on it.

use futures_util::future::BoxFuture;
use rabbit_backoff_core::{Binding, ExchangeKind, QueueDecl};

use super::confirm::{Confirm, PendingConfirm};
use super::delivery::{Deliveries, Delivery};
use super::publication::Publication;
use super::queue_info::QueueInfo;
use super::stream_offset::StreamOffset;
use super::transport_error::TransportError;

/// One channel, in publisher-confirm mode. A refused operation (such as a
/// declaration with other arguments than the existing queue's) closes it, as
/// AMQP 0-9-1 does: every later call fails with the same error.
pub trait Channel: Send + Sync + 'static {
    /// Declares a durable exchange (idempotent when it exists with the same type).
    fn declare_exchange<'a>(
        &'a self,
        name: &'a str,
        kind: ExchangeKind,
    ) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Declares a durable queue with its arguments (idempotent when it exists
    /// with the same arguments; [`TransportError::Refused`] with code 406
    /// `PRECONDITION_FAILED` otherwise).
    fn declare_queue<'a>(
        &'a self,
        queue: &'a QueueDecl,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>>;

    /// Binds a queue to an exchange with a routing key.
    fn bind_queue<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Removes the binding of a queue to an exchange with a routing key; a
    /// binding that does not exist is no error. The default refuses, for a
    /// broker that cannot.
    fn unbind_queue<'a>(
        &'a self,
        binding: &'a Binding,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        refused(format!(
            "'{}' from '{}': this broker cannot remove a binding",
            binding.queue, binding.exchange
        ))
    }

    /// Checks that an exchange exists (a passive declare): code 404
    /// `NOT_FOUND` when it does not.
    fn check_exchange<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Checks that a queue exists (a passive declare) and reads its depth:
    /// code 404 `NOT_FOUND` when it does not.
    fn check_queue<'a>(&'a self, name: &'a str)
    -> BoxFuture<'a, Result<QueueInfo, TransportError>>;

    /// Sets how many unacknowledged deliveries the broker sends to this
    /// channel's consumers (`basic.qos`, per consumer).
    fn qos(&self, prefetch: u16) -> BoxFuture<'_, Result<(), TransportError>>;

    /// Starts consuming `queue`, manual acknowledgement.
    fn consume<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<Deliveries, TransportError>>;

    /// Starts consuming the stream `queue` from `offset`, manual
    /// acknowledgement: the messages stay in the stream, and an ack only
    /// lets the broker send more, so set a prefetch with
    /// [`qos`](Channel::qos) first. The default refuses: a broker without
    /// streams (the in-memory one) has none to read.
    fn consume_stream<'a>(
        &'a self,
        queue: &'a str,
        offset: StreamOffset,
    ) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
        let _ = offset;
        refused(format!("'{queue}': this broker has no stream queues"))
    }

    /// Stops the consumer with this tag: nothing more is delivered to it; the
    /// deliveries it holds stay unacknowledged until settled or the channel
    /// closes.
    fn cancel<'a>(&'a self, consumer_tag: &'a str) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Takes the message at the head of `queue`, unacknowledged (`basic.get`).
    fn get<'a>(&'a self, queue: &'a str)
    -> BoxFuture<'a, Result<Option<Delivery>, TransportError>>;

    /// Publishes with `mandatory` and resolves once the broker confirmed this
    /// very message (or returned or refused it).
    fn publish<'a>(
        &'a self,
        message: Publication<'a>,
    ) -> BoxFuture<'a, Result<Confirm, TransportError>>;

    /// Publishes like [`publish`](Channel::publish), but resolves as soon as
    /// the message is handed to the connection, in call order, with the
    /// broker's confirmation still to come: many messages can be in flight
    /// at once, and still reach the queue in the order they were sent.
    fn send<'a>(
        &'a self,
        message: Publication<'a>,
    ) -> BoxFuture<'a, Result<PendingConfirm, TransportError>> {
        Box::pin(async move {
            let confirm = self.publish(message).await?;
            let pending: PendingConfirm = Box::pin(std::future::ready(Ok(confirm)));
            Ok(pending)
        })
    }

    /// Removes every ready message of `queue` (`queue.purge`) and says how
    /// many; unacknowledged deliveries stay. The default refuses, for a
    /// broker that cannot.
    fn purge_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<u32, TransportError>> {
        refused(format!("'{name}': this broker cannot purge a queue"))
    }

    /// Makes a metadata write that a clustered broker commits only with its
    /// cluster's majority, and undoes it: on RabbitMQ, declares a
    /// server-named, exclusive, auto-delete queue and deletes it. On 4.x
    /// (metadata in Khepri, a Raft store) it gets no answer on a node cut off
    /// from the majority, for as long as the cut lasts, while the connection
    /// and its heartbeats stay healthy; the runtime's metadata watch bounds
    /// it with a timeout. The default answers at once, for a broker that
    /// never loses a majority (the in-memory one).
    fn probe_metadata(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Declares `name` as an exclusive, auto-delete queue of this channel's
    /// connection: a lock that the broker releases when the connection
    /// closes, however it ends. Another connection that declares it while
    /// it is held gets [`TransportError::Refused`] with code 405
    /// `RESOURCE_LOCKED`. The default refuses, for a broker that cannot.
    fn declare_exclusive<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        refused(format!("'{name}': this broker has no exclusive queues"))
    }

    /// Deletes a queue and its messages (nothing when it does not exist).
    fn delete_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Closes the channel; its unsettled deliveries return to their queues,
    /// in their original order.
    fn close(&self) -> BoxFuture<'_, ()>;
}

/// What a default method answers for an operation the broker cannot make:
/// [`TransportError::Other`] saying `why`.
fn refused<'a, T: Send + 'a>(why: String) -> BoxFuture<'a, Result<T, TransportError>> {
    Box::pin(std::future::ready(Err(TransportError::Other(why))))
}
