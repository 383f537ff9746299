//! Handler parameters after the message: extractors, recognised by trait as
//! in axum, not by name.

use std::any::Any;

use crate::consume::context::Context;
use crate::consume::state::{State, StateRequirement};
#[cfg(feature = "postgres")]
use crate::dedupe::{Transaction, Tx};

/// A handler parameter taken from the delivery's [`Context`]: `&Context`
/// itself, or a [`State<T>`] registered with the runtime. Implement it for
/// your own extractors (a tenant read from a header, a tracing handle).
///
/// ```
/// use rabbit_backoff::{Context, FromContext};
///
/// /// The `tenant` header, or "default".
/// struct Tenant(String);
///
/// impl<'a> FromContext<'a> for Tenant {
///     fn from_context(ctx: &'a Context) -> Self {
///         Tenant(ctx.header_str("tenant").unwrap_or("default").to_owned())
///     }
/// }
/// let ctx = Context::builder("orders").header("tenant", "acme").build();
/// assert_eq!(Tenant::from_context(&ctx).0, "acme");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a handler parameter",
    label = "after the message, a handler takes only extractors",
    note = "the first parameter is the decoded message; the others are `&rabbit_backoff::Context`, `State<T>`, or types implementing `rabbit_backoff::FromContext`"
)]
pub trait FromContext<'a>: Sized {
    /// The parameter's value for one delivery.
    fn from_context(ctx: &'a Context) -> Self;

    /// The state it needs registered, checked when the runtime is built so
    /// that a missing one fails start-up, never a message.
    fn requirement() -> Option<StateRequirement> {
        None
    }
}

impl<'a> FromContext<'a> for &'a Context {
    fn from_context(ctx: &'a Context) -> Self {
        ctx
    }
}

impl<'a, T: Any + Send + Sync> FromContext<'a> for State<T> {
    fn from_context(ctx: &'a Context) -> Self {
        // The runtime checked at start-up that every required state is
        // registered, so a missing one never reaches a handler.
        ctx.state::<T>().unwrap_or_else(|| {
            panic!(
                "no State<{}> registered; call .state(…) on the runtime builder",
                std::any::type_name::<T>()
            )
        })
    }

    fn requirement() -> Option<StateRequirement> {
        Some(StateRequirement::of::<T>())
    }
}

/// The delivery's transaction in a `PostgresStore` (see [`Tx`]).
///
#[cfg(feature = "postgres")]
impl<'a> FromContext<'a> for Tx<'a> {
    fn from_context(ctx: &'a Context) -> Self {
        // The runtime checked at start-up that a consumer taking Tx has
        // dedupe on a transactional store, so every delivery has one.
        match ctx.transaction.as_deref() {
            Some(transaction) => transaction.tx(),
            None => panic!(
                "no transaction for this delivery: a handler taking Tx needs dedupe = \"…\" and a PostgresStore"
            ),
        }
    }

    fn requirement() -> Option<StateRequirement> {
        transaction_requirement()
    }
}

/// What a handler taking `Tx` requires: checked against the consumer's
/// dedupe and store at start-up instead of the registered state.
pub(crate) fn transaction_requirement() -> Option<StateRequirement> {
    #[cfg(feature = "postgres")]
    return Some(StateRequirement::of::<Transaction>());
    #[cfg(not(feature = "postgres"))]
    None
}
