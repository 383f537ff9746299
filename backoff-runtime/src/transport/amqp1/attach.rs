//! Attaching a receiver link to a queue on a session that the channel and
//! its link tasks share (a link task attaches again when it recycles its
//! link, see [`Link`](super::link::Link)).

use std::sync::Arc;
use std::time::Duration;

use fe2o3_amqp::link::{CreditMode, Receiver, ReceiverAttachError};
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::definitions::{AmqpError, ErrorCondition};

use super::address::queue_address;
use crate::transport::transport_error::TransportError;

/// A session, `None` once its channel closed it.
pub(crate) type SharedSession = Arc<tokio::sync::Mutex<Option<SessionHandle<()>>>>;

/// Attaches a receiver link named `name` to `queue` on `session`, without
/// credit.
pub(crate) async fn attach_receiver(
    session: &SharedSession,
    name: &str,
    queue: &str,
) -> Result<Receiver, TransportError> {
    let mut session = session.lock().await;
    let session = session
        .as_mut()
        .ok_or_else(|| TransportError::Closed("the AMQP 1.0 channel is closed".into()))?;
    Receiver::builder()
        .name(name)
        .source(queue_address(queue))
        .credit_mode(CreditMode::Manual)
        .attach(session)
        .await
        .map_err(|e| attach_error(queue, e))
}

/// How long a new consumer link waits, with no credit, for the broker's
/// first `flow` before it grants its credit.
const FIRST_FLOW_WAIT: Duration = Duration::from_millis(10);

/// Attaches a consumer's receiver link named `name` to `queue` on
/// `session`, with `credit`.
///
/// RabbitMQ 4.x answers a link's first credit request with a `flow` that
/// says the consumer is active (`rabbitmq:active`), with the link's
/// delivery count. fe2o3-amqp 0.18.4 applies that count as soon as the flow
/// arrives, while transfers sent before it may still wait in the link's
/// buffer, and then counts them a second time: the link ends up granting
/// credit beyond its own count and drops what comes past it (see
/// [`Link`](super::link::Link)). So the first credit request grants none:
/// the broker answers it with no transfer in flight, and the credit follows
/// once that answer had time to arrive (a second request sent before the
/// answer would be held back by the broker and answered without the flow,
/// which would then come with the first transfers). A late answer costs at
/// most one recycled link.
pub(crate) async fn attach_consumer(
    session: &SharedSession,
    name: &str,
    queue: &str,
    credit: u32,
) -> Result<Receiver, TransportError> {
    let mut receiver = attach_receiver(session, name, queue).await?;
    let granting = |e| TransportError::Closed(format!("granting credit on queue '{queue}': {e}"));
    receiver.set_credit(0).await.map_err(granting)?;
    tokio::time::sleep(FIRST_FLOW_WAIT).await;
    receiver.set_credit(credit).await.map_err(granting)?;
    Ok(receiver)
}

/// A refused attach in the transport's terms: a queue that does not exist
/// is `NOT_FOUND`, as AMQP 0-9-1 says it.
fn attach_error(queue: &str, error: ReceiverAttachError) -> TransportError {
    match error {
        ReceiverAttachError::RemoteClosedWithError(e)
            if e.condition == ErrorCondition::AmqpError(AmqpError::NotFound) =>
        {
            TransportError::Refused {
                code: crate::transport::transport_error::NOT_FOUND,
                text: e
                    .description
                    .unwrap_or_else(|| format!("no queue '{queue}'")),
            }
        }
        ReceiverAttachError::RemoteClosedWithError(e) => TransportError::Other(format!(
            "attaching to queue '{queue}': {:?}{}",
            e.condition,
            e.description.map(|d| format!(": {d}")).unwrap_or_default()
        )),
        other => TransportError::Other(format!("attaching to queue '{queue}': {other}")),
    }
}

/// A link name for a link of `kind` (`consumer`, `get`), unique in the
/// container.
pub(crate) fn link_name(kind: &str) -> String {
    format!("rabbit-backoff-{kind}-{}", uuid::Uuid::new_v4().simple())
}
