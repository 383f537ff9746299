//! Attaching a receiver link to a queue on a session that the channel and
//! its link tasks share (a link task attaches again when it recycles its
//! link, see [`Link`](super::link::Link)).

use std::sync::Arc;

use fe2o3_amqp::link::{CreditMode, Receiver, ReceiverAttachError};
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::definitions::{AmqpError, ErrorCondition};

use super::address::queue_address;
use crate::transport::TransportError;

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

/// Attaches a consumer's receiver link named `name` to `queue` on
/// `session`, with `credit`.
pub(crate) async fn attach_consumer(
    session: &SharedSession,
    name: &str,
    queue: &str,
    credit: u32,
) -> Result<Receiver, TransportError> {
    let mut receiver = attach_receiver(session, name, queue).await?;
    receiver
        .set_credit(credit)
        .await
        .map_err(|e| TransportError::Closed(format!("granting credit on queue '{queue}': {e}")))?;
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
                code: crate::transport::NOT_FOUND,
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
