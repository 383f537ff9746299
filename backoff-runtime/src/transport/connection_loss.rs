//! A connection that is gone: once the client has declared it lost (a reset
//! socket, a node killed under it, a missed heartbeat, a forced close),
//! nothing sent on it will be answered. Every operation of the transport
//! races against [`Lost`], so that a publish awaiting its confirm, an ack, a
//! channel close or a consumer's stream gives up at once instead of waiting
//! for an answer that cannot come.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::Poll;

use tokio::sync::Notify;

use super::transport_error::TransportError;

/// Why a connection was lost, once it is, and who waits for it.
#[derive(Debug, Default)]
struct Loss {
    reason: OnceLock<String>,
    declared: Notify,
}

/// Declares a connection lost; held by the connection's implementation.
/// Its [`Lost`] watchers see the loss at once.
#[derive(Debug, Clone, Default)]
pub struct LostSignal {
    loss: Arc<Loss>,
}

impl LostSignal {
    /// A connection not lost yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares the connection lost, saying why; the first reason stays.
    pub fn lose(&self, why: impl Into<String>) {
        if self.loss.reason.set(why.into()).is_ok() {
            self.loss.declared.notify_waiters();
        }
    }

    /// A watcher of this connection's loss.
    pub fn watch(&self) -> Lost {
        Lost {
            loss: Some(Arc::clone(&self.loss)),
        }
    }
}

/// Watches whether a connection is lost: cheap to clone into its channels,
/// their consumers and their deliveries, and to ask (one atomic load).
#[derive(Debug, Clone, Default)]
pub struct Lost {
    /// `None`: a connection that is never declared lost.
    loss: Option<Arc<Loss>>,
}

impl Lost {
    /// A watcher that never sees a loss, for a connection that reports none.
    pub fn never() -> Self {
        Lost { loss: None }
    }

    fn why(&self) -> Option<&str> {
        self.loss.as_ref()?.reason.get().map(String::as_str)
    }

    /// Why the connection was lost, once it is.
    pub fn reason(&self) -> Option<String> {
        self.why().map(str::to_owned)
    }

    /// Whether the connection is lost.
    pub fn is_lost(&self) -> bool {
        self.why().is_some()
    }

    /// Resolves once the connection is lost (never, for [`Lost::never`]), with why.
    pub async fn wait(&self) -> String {
        let Some(loss) = &self.loss else {
            return std::future::pending().await;
        };
        loop {
            let declared = loss.declared.notified();
            tokio::pin!(declared);
            // Registered before looking, so that a loss declared in between
            // still wakes it.
            declared.as_mut().enable();
            if let Some(reason) = loss.reason.get() {
                return reason.clone();
            }
            declared.await;
        }
    }

    /// The error an operation on a lost connection fails with.
    pub fn error(reason: &str) -> TransportError {
        TransportError::Closed(format!("the connection was lost: {reason}"))
    }

    /// Runs `operation` unless the connection is lost: fails at once when it
    /// is already, and gives up on `operation` as soon as it is.
    pub async fn or_fail<T>(
        &self,
        operation: impl Future<Output = Result<T, TransportError>>,
    ) -> Result<T, TransportError> {
        let Some(loss) = &self.loss else {
            return operation.await;
        };
        if let Some(reason) = loss.reason.get() {
            return Err(Self::error(reason));
        }
        let mut operation = std::pin::pin!(operation);
        // Registered for the loss only once the operation has to wait.
        let mut declared = std::pin::pin!(loss.declared.notified());
        std::future::poll_fn(|cx| {
            if let Poll::Ready(result) = operation.as_mut().poll(cx) {
                return Poll::Ready(result);
            }
            let _ = declared.as_mut().poll(cx);
            match loss.reason.get() {
                Some(reason) => Poll::Ready(Err(Self::error(reason))),
                None => Poll::Pending,
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_watcher_sees_the_loss_with_its_first_reason() {
        let signal = LostSignal::new();
        let lost = signal.watch();
        assert!(!lost.is_lost());
        let waiting = tokio::spawn({
            let lost = lost.clone();
            async move { lost.wait().await }
        });
        signal.lose("connection reset by peer");
        signal.lose("a later reason");
        assert_eq!(waiting.await.unwrap(), "connection reset by peer");
        assert!(lost.is_lost());
        assert_eq!(
            signal.watch().reason().as_deref(),
            Some("connection reset by peer")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_operation_that_would_never_end_gives_up_when_the_connection_is_lost() {
        let signal = LostSignal::new();
        let lost = signal.watch();
        let hanging = tokio::spawn(async move {
            lost.or_fail(std::future::pending::<Result<(), TransportError>>())
                .await
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!hanging.is_finished(), "nothing lost yet: it waits");
        signal.lose("node killed");
        let error = hanging.await.unwrap().unwrap_err();
        assert_eq!(
            error,
            TransportError::Closed("the connection was lost: node killed".into())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn on_a_lost_connection_an_operation_is_not_even_started() {
        let signal = LostSignal::new();
        signal.lose("gone");
        let mut started = false;
        let result = signal
            .watch()
            .or_fail(async {
                started = true;
                Ok(())
            })
            .await;
        assert!(result.is_err());
        assert!(!started);
    }

    #[tokio::test(start_paused = true)]
    async fn never_lost_and_dropped_signals_let_operations_run() {
        assert_eq!(Lost::never().or_fail(async { Ok(1) }).await, Ok(1));
        let dropped = LostSignal::new().watch();
        assert_eq!(dropped.or_fail(async { Ok(2) }).await, Ok(2));
        let waited = tokio::time::timeout(Duration::from_secs(3600), dropped.wait()).await;
        assert!(
            waited.is_err(),
            "a connection dropped unlost is never reported lost"
        );
    }
}
