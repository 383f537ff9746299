//! [`Amqp1Channel`]: one AMQP 1.0 session, which only consumes: a receiver
//! link per consumer (and per `get`), each in a task of its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fe2o3_amqp::link::RecvError;
use fe2o3_amqp::session::SessionHandle;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use rabbit_backoff_core::{Binding, ExchangeKind, QueueDecl};
use tokio::sync::mpsc;

use super::attach::{SharedSession, attach_consumer, attach_receiver, link_name};
use super::command::{Command, Commands};
use super::link::{Link, Mode};
use super::message::AnyBody;
use crate::transport::channel::Channel;
use crate::transport::confirm::Confirm;
use crate::transport::connection_loss::Lost;
use crate::transport::delivery::{Deliveries, Delivery};
use crate::transport::publication::Publication;
use crate::transport::queue_info::QueueInfo;
use crate::transport::stream_offset::StreamOffset;
use crate::transport::transport_error::TransportError;

/// The credit of a consumer whose channel set no prefetch (or 0, AMQP
/// 0-9-1's "no limit"): as many as fit in AMQP 0-9-1's prefetch.
const UNLIMITED_CREDIT: u32 = u16::MAX as u32;

/// How long a `get` waits for the message its drain asks for before it
/// takes the queue for empty: fe2o3-amqp does not say when the broker
/// answered the drain without a message.
pub(crate) const GET_WAIT: Duration = Duration::from_millis(500);

/// How long closing waits for the broker's answer to a detach or an end.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// One AMQP 1.0 session.
pub(crate) struct Amqp1Channel {
    /// `None` once closed.
    session: SharedSession,
    /// The credit of the next consumer's link (`qos`); 0: unlimited.
    prefetch: AtomicU32,
    /// Each open link's commands, by name.
    links: Mutex<HashMap<String, Commands>>,
    lost: Lost,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the AMQP 1.0 channel refuses: everything but consuming.
fn refused<T: Send + 'static>(what: &str) -> BoxFuture<'static, Result<T, TransportError>> {
    let error = TransportError::Other(format!(
        "{what}: the AMQP 1.0 channel only consumes (qos, consume, cancel, get, close); declare, publish and the rest stay on AMQP 0-9-1"
    ));
    Box::pin(std::future::ready(Err(error)))
}

impl Amqp1Channel {
    /// A channel on `session`, of a connection watched by `lost`.
    pub(crate) fn new(session: SessionHandle<()>, lost: Lost) -> Self {
        Amqp1Channel {
            session: Arc::new(tokio::sync::Mutex::new(Some(session))),
            prefetch: AtomicU32::new(0),
            links: Mutex::new(HashMap::new()),
            lost,
        }
    }

    /// Starts `link` and keeps its commands, forgetting those of links
    /// that ended.
    fn start(&self, name: String, link: Link, commands: Commands) {
        let mut links = lock(&self.links);
        links.retain(|_, commands| !commands.is_closed());
        links.insert(name, commands);
        tokio::spawn(link.run());
    }

    /// Closes the link whose commands are `commands`.
    async fn close_link(commands: Commands) -> Result<(), TransportError> {
        let (done, closed) = tokio::sync::oneshot::channel();
        if commands.send(Command::Close { done }).is_err() {
            return Ok(()); // ended already
        }
        match tokio::time::timeout(CLOSE_TIMEOUT, closed).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Ok(()),
            Err(_) => Err(TransportError::Closed(
                "the broker did not answer the link's detach".into(),
            )),
        }
    }

    async fn get_one(&self, queue: &str) -> Result<Option<Delivery>, TransportError> {
        let name = link_name("get");
        let mut receiver = attach_receiver(&self.session, &name, queue).await?;
        let flow = async {
            receiver.set_credit(1).await?;
            receiver.drain().await
        };
        if let Err(e) = flow.await {
            return Err(TransportError::Closed(format!(
                "asking queue '{queue}' for a message: {e}"
            )));
        }
        let received = tokio::time::timeout(GET_WAIT, receiver.recv::<AnyBody>()).await;
        let received = match received {
            Err(_) => {
                // Empty. A message the broker sends in between stays
                // unsettled and returns to the queue with the detach.
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, receiver.close()).await;
                return Ok(None);
            }
            Ok(Ok(delivery)) => delivery.into_parts(),
            Ok(Err(RecvError::MessageDecode(e))) => {
                // Its body is not kept: its queue dead-letters it as it is.
                let rejected = receiver.reject(e.info, None).await;
                tracing::error!(
                    "getting a message from queue '{queue}': it could not be decoded ({}); \
                     rejected, so that the queue dead-letters it as it is ({rejected:?})",
                    e.source
                );
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, receiver.close()).await;
                return Ok(None);
            }
            Ok(Err(e)) => {
                return Err(TransportError::Closed(format!(
                    "getting a message from queue '{queue}': {e}"
                )));
            }
        };
        let (mut link, commands) = Link::new(receiver, Mode::Get, self.lost.clone());
        let got = link.take(received);
        self.start(name, link, commands);
        Ok(got)
    }
}

impl Channel for Amqp1Channel {
    fn declare_exchange<'a>(
        &'a self,
        name: &'a str,
        _kind: ExchangeKind,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        refused(&format!("declaring exchange '{name}'"))
    }

    fn declare_queue<'a>(
        &'a self,
        queue: &'a QueueDecl,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        refused(&format!("declaring queue '{}'", queue.name))
    }

    fn bind_queue<'a>(&'a self, binding: &'a Binding) -> BoxFuture<'a, Result<(), TransportError>> {
        refused(&format!(
            "binding '{}' to '{}'",
            binding.queue, binding.exchange
        ))
    }

    fn unbind_queue<'a>(
        &'a self,
        binding: &'a Binding,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        refused(&format!(
            "unbinding '{}' from '{}'",
            binding.queue, binding.exchange
        ))
    }

    fn check_exchange<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        refused(&format!("checking exchange '{name}'"))
    }

    fn check_queue<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
        refused(&format!("checking queue '{name}'"))
    }

    /// Remembered as the link credit of the next [`consume`](Channel::consume).
    fn qos(&self, prefetch: u16) -> BoxFuture<'_, Result<(), TransportError>> {
        self.prefetch.store(prefetch.into(), Ordering::Relaxed);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Attaches a receiver link to `/queues/<queue>` with the prefetch as
    /// its credit, granted again as deliveries are settled; the link's name
    /// is the consumer tag.
    fn consume<'a>(&'a self, queue: &'a str) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
        Box::pin(self.lost.or_fail(async move {
            let name = link_name("consumer");
            let prefetch = match self.prefetch.load(Ordering::Relaxed) {
                0 => UNLIMITED_CREDIT,
                n => n,
            };
            let receiver = attach_consumer(&self.session, &name, queue, prefetch).await?;
            let (sink, deliveries) = mpsc::unbounded_channel();
            let (link, commands) = Link::new(
                receiver,
                Mode::Consume {
                    sink,
                    prefetch,
                    queue: queue.to_owned(),
                    session: self.session.clone(),
                },
                self.lost.clone(),
            );
            self.start(name.clone(), link, commands);
            let stream = futures_util::stream::unfold(deliveries, |mut deliveries| async move {
                deliveries.recv().await.map(|item| (item, deliveries))
            })
            .boxed();
            Ok(Deliveries::new(name, stream))
        }))
    }

    fn consume_stream<'a>(
        &'a self,
        queue: &'a str,
        _offset: StreamOffset,
    ) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
        refused(&format!("consuming stream '{queue}'"))
    }

    /// Detaches the consumer's link: its unsettled deliveries go back to
    /// the queue, and its stream ends.
    fn cancel<'a>(&'a self, consumer_tag: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(self.lost.or_fail(async move {
            let commands = lock(&self.links).remove(consumer_tag);
            match commands {
                Some(commands) => Self::close_link(commands).await,
                None => Err(TransportError::Other(format!(
                    "no consumer '{consumer_tag}' on this AMQP 1.0 channel"
                ))),
            }
        }))
    }

    /// Attaches a link with credit 1 and drains it: the message at the head
    /// of the queue, or `None` when none came within [`GET_WAIT`]. The link
    /// stays attached until the message is settled.
    fn get<'a>(
        &'a self,
        queue: &'a str,
    ) -> BoxFuture<'a, Result<Option<Delivery>, TransportError>> {
        Box::pin(self.lost.or_fail(self.get_one(queue)))
    }

    fn publish<'a>(
        &'a self,
        message: Publication<'a>,
    ) -> BoxFuture<'a, Result<Confirm, TransportError>> {
        refused(&format!(
            "publishing to '{}' with routing key '{}'",
            message.exchange, message.routing_key
        ))
    }

    fn purge_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<u32, TransportError>> {
        refused(&format!("purging queue '{name}'"))
    }

    fn probe_metadata(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        refused("probing the metadata store")
    }

    fn delete_queue<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
        refused(&format!("deleting queue '{name}'"))
    }

    /// Detaches every link (their unsettled deliveries go back to their
    /// queues) and ends the session.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let links: Vec<Commands> = lock(&self.links).drain().map(|(_, c)| c).collect();
            for result in
                futures_util::future::join_all(links.into_iter().map(Self::close_link)).await
            {
                if let Err(e) = result {
                    tracing::debug!("closing an AMQP 1.0 channel: {e}");
                }
            }
            let session = self.session.lock().await.take();
            if let Some(mut session) = session
                && !self.lost.is_lost()
            {
                match tokio::time::timeout(CLOSE_TIMEOUT, session.end()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::debug!("ending an AMQP 1.0 session: {e}"),
                    Err(_) => tracing::debug!("the broker did not answer the session's end"),
                }
            }
        })
    }
}
