//! What a link's [`Acker`](crate::transport::acker::Acker)s ask of its task: the
//! [`Outcome`] a delivery settles as, and closing the link.

use fe2o3_amqp::link::receiver::TerminalDeliveryState;
use fe2o3_amqp::types::messaging::{Accepted, Modified, Rejected, Released};
use tokio::sync::{mpsc, oneshot};

use crate::transport::transport_error::TransportError;

/// How a delivery is settled.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// `accepted`: done with.
    Accepted,
    /// `released`: back to the queue, not counted as failed.
    Released,
    /// `rejected`: dead-lettered by the queue.
    Rejected,
    /// `modified`, with its flags and annotations.
    Modified(Modified),
}

impl Outcome {
    /// The delivery state fe2o3-amqp sends for it.
    pub(crate) fn state(self) -> TerminalDeliveryState {
        match self {
            Outcome::Accepted => TerminalDeliveryState::Accepted(Accepted {}),
            Outcome::Released => TerminalDeliveryState::Released(Released {}),
            Outcome::Rejected => TerminalDeliveryState::Rejected(Rejected { error: None }),
            Outcome::Modified(modified) => TerminalDeliveryState::Modified(modified),
        }
    }
}

/// What a link task is asked to do.
pub(crate) enum Command {
    /// Settle the delivery `tag` (with `multiple`, every unsettled one up
    /// to it) as `outcome`; `done` once the disposition is sent.
    Settle {
        tag: u64,
        multiple: bool,
        outcome: Outcome,
        done: oneshot::Sender<Result<(), TransportError>>,
    },
    /// Detach the link (its unsettled deliveries return to the queue) and
    /// end; `done` once detached.
    Close {
        done: oneshot::Sender<Result<(), TransportError>>,
    },
}

/// The commands of a link task, to settle its deliveries or close it.
pub(crate) type Commands = mpsc::UnboundedSender<Command>;
