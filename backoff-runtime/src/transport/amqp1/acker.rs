//! [`LinkAcker`]: settles one delivery of an AMQP 1.0 link by asking the
//! link's task, which owns the receiver.

use fe2o3_amqp::types::messaging::Modified;
use fe2o3_amqp::types::primitives::{OrderedMap, Symbol, Timestamp, Value};
use futures_util::future::BoxFuture;
use tokio::sync::oneshot;

use super::command::{Command, Commands, Outcome};
use crate::transport::acker::Settle;
use crate::transport::connection_loss::Lost;
use crate::transport::modification::{AnnotationValue, Modification};
use crate::transport::transport_error::TransportError;

/// Settles the delivery `tag` of one link through the link's task.
pub(crate) struct LinkAcker {
    tag: u64,
    link: Commands,
    lost: Lost,
    /// The link's name, for errors.
    name: String,
}

impl LinkAcker {
    /// The acker of the delivery `tag` of the link `name`, whose task takes
    /// `link`'s commands.
    pub(crate) fn new(tag: u64, link: Commands, lost: Lost, name: &str) -> Self {
        LinkAcker {
            tag,
            link,
            lost,
            name: name.to_owned(),
        }
    }

    /// Settles as `outcome` (with `multiple`, the unsettled deliveries up
    /// to this one too); resolves once the disposition is sent.
    async fn settle(&self, multiple: bool, outcome: Outcome) -> Result<(), TransportError> {
        let gone = || {
            TransportError::Closed(format!(
                "the AMQP 1.0 link {} is detached: its unsettled deliveries went back to the queue",
                self.name
            ))
        };
        self.lost
            .or_fail(async {
                let (done, settled) = oneshot::channel();
                self.link
                    .send(Command::Settle {
                        tag: self.tag,
                        multiple,
                        outcome,
                        done,
                    })
                    .map_err(|_| gone())?;
                settled.await.map_err(|_| gone())?
            })
            .await
    }
}

/// `modification` as AMQP 1.0's `modified` outcome.
pub(crate) fn modified(modification: Modification) -> Modified {
    let annotations = (!modification.annotations.is_empty()).then(|| {
        let mut fields = OrderedMap::new();
        for (key, value) in modification.annotations {
            let value = match value {
                AnnotationValue::String(s) => Value::String(s),
                AnnotationValue::Uint(n) => Value::Uint(n),
                AnnotationValue::Timestamp(ms) => {
                    Value::Timestamp(Timestamp::from_milliseconds(ms))
                }
            };
            fields.insert(Symbol::from(key), value);
        }
        fields
    });
    Modified {
        delivery_failed: Some(modification.delivery_failed),
        undeliverable_here: Some(modification.undeliverable_here),
        message_annotations: annotations,
    }
}

impl Settle for LinkAcker {
    fn delivery_tag(&self) -> u64 {
        self.tag
    }

    /// `accepted`; with `multiple`, for every unsettled delivery of the
    /// link up to this one as well.
    fn ack(&self, multiple: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.settle(multiple, Outcome::Accepted))
    }

    /// `released` when `requeue` (back to the queue, not counted), else
    /// `rejected` (dead-lettered).
    fn nack(&self, requeue: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        let outcome = if requeue {
            Outcome::Released
        } else {
            Outcome::Rejected
        };
        Box::pin(self.settle(false, outcome))
    }

    /// `modified` with `delivery-failed`, without annotations: counted in
    /// `x-delivery-count`, back to the queue.
    fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.settle(false, Outcome::Modified(modified(Modification::failed()))))
    }

    /// `modified` with `modification`'s flags and annotations.
    fn modify(&self, modification: Modification) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.settle(false, Outcome::Modified(modified(modification))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modification_becomes_modified_with_its_annotations() {
        let m = modified(
            Modification::undeliverable()
                .annotate("x-opt-error", AnnotationValue::String("boom".into()))
                .annotate("x-opt-retry-count", AnnotationValue::Uint(3))
                .annotate(
                    "x-opt-delivery-time",
                    AnnotationValue::Timestamp(1_700_000_000_123),
                ),
        );
        assert_eq!(m.delivery_failed, Some(true));
        assert_eq!(m.undeliverable_here, Some(true));
        let annotations = m.message_annotations.expect("annotations");
        assert_eq!(
            annotations.get(&Symbol::from("x-opt-error")),
            Some(&Value::String("boom".into()))
        );
        assert_eq!(
            annotations.get(&Symbol::from("x-opt-retry-count")),
            Some(&Value::Uint(3))
        );
        assert_eq!(
            annotations.get(&Symbol::from("x-opt-delivery-time")),
            Some(&Value::Timestamp(Timestamp::from_milliseconds(
                1_700_000_000_123
            )))
        );
        let failed = modified(Modification::failed());
        assert_eq!(failed.undeliverable_here, Some(false));
        assert_eq!(failed.message_annotations, None);
    }
}
