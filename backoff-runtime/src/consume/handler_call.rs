//! Running a consumer's handler on one delivery: the body decoded, the
//! handler called with its timeout and a panic caught, with the immediate
//! retries of its spec; what comes of it, as an [`Outcome`].

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use rabbit_backoff_core::{Classify, MAX_ERROR_LEN, Outcome, Verdict, truncate_error};

use crate::consume::consumer::Consumer;
use crate::consume::context::Context;
use crate::consume::worker::Worker;
use crate::dedupe::HeldKey;

/// The first pause of an immediate retry; the n-th waits n times as long.
const IMMEDIATE_PAUSE: Duration = Duration::from_millis(50);

impl<C: Consumer> Worker<C> {
    /// Decodes the body and runs the handler (with its timeout, catching a
    /// panic) into an outcome, with the immediate retries of the spec.
    /// With a held inbox key, each immediate retry starts the store's
    /// transaction afresh.
    pub(super) async fn run_handler(
        &self,
        data: &[u8],
        ctx: &Context,
        held: Option<&dyn HeldKey>,
    ) -> Outcome {
        let mut outcome = self.call(data, ctx).await;
        // Immediate retries: in the process, after a short pause, for blips.
        for retry in 1..=self.spec.immediate {
            let Outcome::Failed { verdict, error } = &outcome else {
                break;
            };
            if matches!(verdict, Verdict::DeadLetter | Verdict::Discard) {
                break;
            }
            let pause = IMMEDIATE_PAUSE * retry;
            tracing::info!(
                error = error.as_str(),
                "failed; immediate retry {retry}/{} in {}ms",
                self.spec.immediate,
                pause.as_millis()
            );
            // Rare: on the heap, not in every delivery's future.
            Box::pin(tokio::time::sleep(pause)).await;
            if let Some(held) = held
                && let Err(e) = held.restart_attempt().await
            {
                tracing::warn!("{e}; the retry's writes may not commit");
            }
            self.meters.immediate_retry();
            outcome = self.call(data, ctx).await;
        }
        outcome
    }

    /// Decodes the body and runs the handler once, with its timeout,
    /// catching a panic.
    async fn call(&self, data: &[u8], ctx: &Context) -> Outcome {
        let message = match self.consumer.decode(data) {
            Ok(message) => message,
            Err(error) => {
                return Outcome::Undecodable {
                    error: truncate_error(&error),
                };
            }
        };
        let handled = AssertUnwindSafe(self.consumer.handle(message, ctx)).catch_unwind();
        let timer = self.meters.handler_started();
        let result = match self.spec.handler_timeout {
            None => Some(handled.await),
            Some(limit) => tokio::time::timeout(limit, handled).await.ok(),
        };
        self.meters.handler_ended(timer);
        match result {
            None => Outcome::Failed {
                verdict: Verdict::Retry,
                error: format!(
                    "handler timed out after {}ms",
                    self.spec.handler_timeout.map_or(0, |t| t.as_millis())
                ),
            },
            Some(Ok(Ok(()))) => Outcome::Success,
            Some(Ok(Err(e))) => Outcome::Failed {
                verdict: e.verdict(),
                error: bounded(e.to_string()),
            },
            Some(Err(panic)) => Outcome::Failed {
                verdict: Verdict::Retry,
                error: bounded(panic_message(panic.as_ref())),
            },
        }
    }
}

/// `error`, cut to the size `x-error` allows when it is longer (see
/// [`truncate_error`]); not copied when it fits.
fn bounded(error: String) -> String {
    if error.len() <= MAX_ERROR_LEN {
        error
    } else {
        truncate_error(&error)
    }
}

/// The message of a caught panic.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string panic payload");
    format!("handler panicked: {text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_panics() {
        let caught = std::panic::catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
        assert_eq!(panic_message(caught.as_ref()), "handler panicked: boom 1");
    }
}
