//! [`UntilLost`]: a consumer's deliveries, ended by its connection's loss.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;

use crate::transport::connection_loss::Lost;
use crate::transport::delivery::Delivery;
use crate::transport::transport_error::TransportError;

/// A consumer's deliveries until its connection is lost; then that error,
/// at once, and the end: the deliveries lapin still buffers could no longer
/// be settled, and handling them would only make duplicates.
pub(super) struct UntilLost<S> {
    deliveries: S,
    watch: Lost,
    /// Waits for the loss while no delivery is ready; `None` once ended.
    lost: Option<BoxFuture<'static, String>>,
}

impl<S> UntilLost<S> {
    /// `deliveries`, until `lost`.
    pub(super) fn new(deliveries: S, lost: Lost) -> Self {
        UntilLost {
            deliveries,
            watch: lost.clone(),
            lost: Some(Box::pin(async move { lost.wait().await })),
        }
    }
}

impl<S> futures_util::Stream for UntilLost<S>
where
    S: futures_util::Stream<Item = Result<Delivery, TransportError>> + Unpin,
{
    type Item = Result<Delivery, TransportError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        if self.lost.is_none() {
            return Poll::Ready(None);
        }
        let reason = match self.watch.reason() {
            Some(reason) => reason,
            None => match self.deliveries.poll_next_unpin(cx) {
                // Waiting for a delivery: wait for the loss too.
                Poll::Pending => match self.lost.as_mut().map(|lost| lost.as_mut().poll(cx)) {
                    Some(Poll::Ready(reason)) => reason,
                    _ => return Poll::Pending,
                },
                ready => return ready,
            },
        };
        self.lost = None;
        Poll::Ready(Some(Err(Lost::error(&reason))))
    }
}
