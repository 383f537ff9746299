//! Publishing with confirms: one message and its own confirm (the
//! framework's copies and the application's messages alike), the typed
//! [`Publisher`](crate::Publisher) handlers and services publish through,
//! and [`Outgoing`](crate::Outgoing), a message a handler publishes with its
//! effects.

pub(crate) mod confirmed;
pub(crate) mod outgoing;
pub(crate) mod publisher;
