//! [`Consumer`]: what `#[backoff_consumer]` generates for a handler, and the
//! runtime registers and runs.

use std::fmt::Display;
use std::future::Future;

use rabbit_backoff_core::{Classify, ConsumerSpec};
use serde::de::DeserializeOwned;

use crate::consume::context::Context;
use crate::consume::state::StateRequirement;

/// A message handler with its queue and retry schedule.
///
/// `#[backoff_consumer]` implements it for you: the attribute turns
/// `async fn process_order(…)` into a value `process_order` that implements
/// this trait. Implement it by hand when the spec is only known at run time.
///
/// ```
/// use rabbit_backoff::{Consumer, Context};
/// use rabbit_backoff::{Classify, ConsumerSpec, ErrorClass};
///
/// #[derive(Debug)]
/// struct Unavailable;
/// impl std::fmt::Display for Unavailable {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("service unavailable")
///     }
/// }
/// impl Classify for Unavailable {
///     fn classify(&self) -> ErrorClass { ErrorClass::Transient }
/// }
///
/// struct Audit;
///
/// impl Consumer for Audit {
///     type Message = serde_json::Value;
///     type Error = Unavailable;
///
///     fn spec(&self) -> ConsumerSpec {
///         ConsumerSpec::new("audit", "1s,10s".parse().unwrap())
///     }
///
///     async fn handle(&self, event: serde_json::Value, ctx: &Context) -> Result<(), Unavailable> {
///         println!("attempt {} of {event}", ctx.attempt());
///         Ok(())
///     }
/// }
/// ```
pub trait Consumer: Send + Sync + 'static {
    /// The decoded payload.
    type Message: DeserializeOwned + Send + 'static;
    /// The handler's error; its `Display` becomes `x-error`.
    type Error: Classify + Display + Send + 'static;

    /// The queue, schedule, flow control and names.
    fn spec(&self) -> ConsumerSpec;

    /// The `State<T>` values the handler takes; checked at start-up.
    fn required_state(&self) -> Vec<StateRequirement> {
        Vec::new()
    }

    /// The error type's own ladders ([`Classify::ladders`]), whose retry
    /// queues the consumer declares with its own.
    fn error_ladders() -> Vec<Vec<u64>>
    where
        Self: Sized,
    {
        <Self::Error as Classify>::ladders()
            .iter()
            .map(|ladder| ladder.to_vec())
            .collect()
    }

    /// Decodes a body. JSON by default; an error dead-letters the message at
    /// once with reason `decode` and the error as `x-error`.
    fn decode(&self, body: &[u8]) -> Result<Self::Message, String> {
        serde_json::from_slice(body).map_err(|e| format!("cannot decode the body as JSON: {e}"))
    }

    /// Handles one message.
    fn handle(
        &self,
        message: Self::Message,
        ctx: &Context,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}
