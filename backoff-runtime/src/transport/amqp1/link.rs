//! One receiver link in a task of its own: the task owns fe2o3-amqp's
//! [`Receiver`] (receiving needs `&mut`), numbers the deliveries 1, 2, 3…,
//! keeps the unsettled ones in order, and settles them on the commands its
//! [`Acker`](crate::transport::acker::Acker)s send.
//!
//! A consumer's task also recycles its link when fe2o3-amqp dropped a
//! transfer as beyond the link's credit. RabbitMQ 4.x answers a link's
//! first credit request with a `flow` carrying its delivery count (and
//! `rabbitmq:active`), and fe2o3-amqp 0.18 takes that count at once, while
//! transfers the broker sent before the flow may still wait in the link's
//! buffer: each of them is then counted twice, the next credit the
//! receiver grants reaches further than it thinks, and it refuses what
//! comes beyond its own count (`TransferLimitExceeded`), keeping no trace
//! of it. The broker holds each such message as delivered until the link
//! detaches. [`attach_consumer`] keeps this from happening: its first
//! credit request grants nothing, so the flow comes with no transfer in
//! flight. Should a link drop transfers all the same (the flow came late),
//! the task grants no more credit, lets the deliveries it handed over be
//! settled, then detaches (the broker returns what was dropped to the
//! queue) and attaches a new link with a fresh count, on the same session
//! and for the same consumer. Nothing is lost or handed over twice; the
//! consumer pauses for as long as its slowest delivery takes. The fix
//! upstream: apply a sender's `flow` to the receiver's delivery count in
//! order with the transfers (in the session, where both arrive). The frame
//! trace, the figures and the report to file: docs/upstream.md, "A receiver
//! counts a flow out of order" (ramqp 0.8, weighed there, would not remove
//! this).

use std::collections::BTreeMap;

use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::{Receiver, RecvError};
use tokio::sync::mpsc;

use super::acker::LinkAcker;
use super::attach::{SharedSession, attach_consumer, link_name};
use super::command::{Command, Commands, Outcome};
use super::message::{AnyBody, Received, delivery};
use crate::transport::acker::Acker;
use crate::transport::connection_loss::Lost;
use crate::transport::delivery::Delivery;
use crate::transport::transport_error::TransportError;

/// A consumer's deliveries, as the link task hands them over.
pub(crate) type Sink = mpsc::UnboundedSender<Result<Delivery, TransportError>>;

/// What a link does with what it receives.
pub(crate) enum Mode {
    /// A consumer's: receives until closed, hands each delivery to the
    /// sink, and grants credit up to `prefetch` unsettled deliveries.
    Consume {
        sink: Sink,
        prefetch: u32,
        /// The queue and the session, to attach again when recycling.
        queue: String,
        session: SharedSession,
    },
    /// A `get`'s: received its one delivery already; detaches once it is
    /// settled.
    Get,
}

/// One receiver link's task.
pub(crate) struct Link {
    receiver: Receiver,
    mode: Mode,
    /// The tag of the last delivery received.
    last_tag: u64,
    /// The deliveries not settled yet, by tag.
    unsettled: BTreeMap<u64, DeliveryInfo>,
    /// Transfers fe2o3-amqp dropped as beyond the credit since the link
    /// was attached: the link is recycled once `unsettled` is empty.
    dropped: u32,
    commands: mpsc::UnboundedReceiver<Command>,
    /// The ackers' way to the task: weak, so that the task ends when every
    /// acker and the channel's handle are gone.
    to_self: mpsc::WeakUnboundedSender<Command>,
    lost: Lost,
}

/// What the task saw first.
enum Event {
    Command(Option<Command>),
    Received(Box<Result<fe2o3_amqp::link::delivery::Delivery<AnyBody>, RecvError>>),
    Lost(String),
}

impl Link {
    /// A link task for `receiver` and the commands to it. For
    /// [`Mode::Get`], `got` is the delivery already received, as the
    /// delivery to hand out.
    pub(crate) fn new(receiver: Receiver, mode: Mode, lost: Lost) -> (Link, Commands) {
        let (commands, receiving) = mpsc::unbounded_channel();
        let link = Link {
            receiver,
            mode,
            last_tag: 0,
            unsettled: BTreeMap::new(),
            dropped: 0,
            commands: receiving,
            to_self: commands.downgrade(),
            lost,
        };
        (link, commands)
    }

    /// A message fe2o3-amqp could not decode (`why`), whose body it does not
    /// keep: settled at once as `rejected`, so that its queue dead-letters
    /// it as it is, body and all (`x-death` says `rejected`), rather than
    /// handed over without its body.
    async fn refuse(&mut self, info: DeliveryInfo, why: &str) {
        let name = self.receiver.name().to_owned();
        match self.receiver.reject(info, None).await {
            Ok(()) => tracing::error!(
                "AMQP 1.0 link {name}: a message could not be decoded ({why}); rejected, so \
                 that its queue dead-letters it as it is"
            ),
            Err(e) => tracing::error!(
                "AMQP 1.0 link {name}: a message could not be decoded ({why}), nor rejected \
                 ({e}); it stays unsettled until the link closes"
            ),
        }
    }

    /// Numbers a delivery received and makes it the transport's.
    pub(crate) fn take(&mut self, received: (DeliveryInfo, Received)) -> Option<Delivery> {
        self.last_tag += 1;
        let tag = self.last_tag;
        let commands = self.to_self.upgrade()?;
        let acker = Acker::new(LinkAcker::new(
            tag,
            commands,
            self.lost.clone(),
            self.receiver.name(),
        ));
        let (info, message) = received;
        self.unsettled.insert(tag, info);
        Some(delivery(message, acker))
    }

    /// Runs the link until it is closed, detached by the broker, or its
    /// connection is lost.
    pub(crate) async fn run(mut self) {
        let lost = self.lost.clone();
        loop {
            let receiving = matches!(self.mode, Mode::Consume { .. });
            let event = tokio::select! {
                biased;
                command = self.commands.recv() => Event::Command(command),
                received = self.receiver.recv::<AnyBody>(), if receiving => {
                    Event::Received(Box::new(received))
                }
                reason = lost.wait() => Event::Lost(reason),
            };
            match event {
                Event::Command(Some(Command::Settle {
                    tag,
                    multiple,
                    outcome,
                    done,
                })) => {
                    let settled = self.settle(tag, multiple, outcome).await;
                    let _ = done.send(settled);
                    if matches!(self.mode, Mode::Get) && self.unsettled.is_empty() {
                        let _ = self.detach().await;
                        return;
                    }
                }
                Event::Command(Some(Command::Close { done })) => {
                    let _ = done.send(self.detach().await);
                    return;
                }
                Event::Command(None) => {
                    let _ = self.detach().await;
                    return;
                }
                Event::Received(received) => {
                    let received = match *received {
                        Ok(delivery) => delivery.into_parts(),
                        Err(RecvError::MessageDecode(e)) => {
                            self.refuse(e.info, &e.source.to_string()).await;
                            continue;
                        }
                        Err(RecvError::TransferLimitExceeded) => {
                            self.dropped += 1;
                            if let Err(error) = self.recycle_when_settled().await {
                                self.hand_over(Err(error));
                                return;
                            }
                            continue;
                        }
                        Err(e) => {
                            let error = TransportError::Closed(format!(
                                "the AMQP 1.0 link {} ended: {e}",
                                self.receiver.name()
                            ));
                            tracing::warn!("{error}");
                            self.hand_over(Err(error));
                            return;
                        }
                    };
                    if let Some(delivery) = self.take(received) {
                        self.hand_over(Ok(delivery));
                    }
                }
                Event::Lost(reason) => {
                    self.hand_over(Err(Lost::error(&reason)));
                    return;
                }
            }
        }
    }

    fn hand_over(&self, item: Result<Delivery, TransportError>) {
        if let Mode::Consume { sink, .. } = &self.mode {
            // A consumer that dropped its stream: what it would have got
            // stays unsettled until the link or its channel closes.
            let _ = sink.send(item);
        }
    }

    async fn settle(
        &mut self,
        tag: u64,
        multiple: bool,
        outcome: Outcome,
    ) -> Result<(), TransportError> {
        if !self.unsettled.contains_key(&tag) {
            return Err(TransportError::Other(format!(
                "delivery {tag} of the AMQP 1.0 link {} is settled already",
                self.receiver.name()
            )));
        }
        let infos: Vec<DeliveryInfo> = if multiple {
            let later = self.unsettled.split_off(&(tag + 1));
            std::mem::replace(&mut self.unsettled, later)
                .into_values()
                .collect()
        } else {
            self.unsettled.remove(&tag).into_iter().collect()
        };
        let state = outcome.state();
        let disposed = if let [info] = infos.as_slice() {
            self.receiver.dispose(info.clone(), state).await
        } else {
            // Consecutive delivery ids go out as one disposition (a range).
            self.receiver.dispose_all(infos, state).await
        };
        disposed.map_err(|e| {
            TransportError::Closed(format!(
                "settling on the AMQP 1.0 link {}: {e}",
                self.receiver.name()
            ))
        })?;
        if self.dropped > 0 {
            return self.recycle_when_settled().await;
        }
        self.refill().await
    }

    /// Once every delivery handed over is settled, replaces a link that
    /// dropped transfers with a new one (see the module's documentation);
    /// until then, grants no credit.
    async fn recycle_when_settled(&mut self) -> Result<(), TransportError> {
        let Mode::Consume {
            prefetch,
            queue,
            session,
            ..
        } = &self.mode
        else {
            return Ok(());
        };
        if !self.unsettled.is_empty() {
            return Ok(());
        }
        let old = self.receiver.name().to_owned();
        let name = link_name("consumer");
        let receiver = attach_consumer(session, &name, queue, *prefetch).await?;
        let old_receiver = std::mem::replace(&mut self.receiver, receiver);
        tracing::debug!(
            "AMQP 1.0 link {old} on queue '{queue}': fe2o3-amqp dropped {} transfer(s) as \
             beyond the credit; replaced by {name}, the broker returns them to the queue",
            self.dropped
        );
        self.dropped = 0;
        if let Err(e) = old_receiver.close().await {
            tracing::debug!("detaching the AMQP 1.0 link {old}: {e}");
        }
        Ok(())
    }

    /// Grants the broker credit up to `prefetch` unsettled deliveries, in
    /// batches of half of it (or one, for a prefetch of one).
    async fn refill(&mut self) -> Result<(), TransportError> {
        let Mode::Consume { prefetch, .. } = self.mode else {
            return Ok(());
        };
        let unsettled = u32::try_from(self.unsettled.len()).unwrap_or(u32::MAX);
        let wanted = prefetch.saturating_sub(unsettled);
        let credit = self.receiver.credit();
        if wanted > credit && wanted - credit >= (prefetch / 2).max(1) {
            self.receiver.set_credit(wanted).await.map_err(|e| {
                TransportError::Closed(format!(
                    "granting credit on the AMQP 1.0 link {}: {e}",
                    self.receiver.name()
                ))
            })?;
        }
        Ok(())
    }

    /// Detaches the link, closing it: RabbitMQ returns its unsettled
    /// deliveries to the queue.
    async fn detach(self) -> Result<(), TransportError> {
        let name = self.receiver.name().to_owned();
        self.receiver
            .close()
            .await
            .map_err(|e| TransportError::Closed(format!("detaching the AMQP 1.0 link {name}: {e}")))
    }
}
