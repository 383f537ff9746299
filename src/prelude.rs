//! What a service using rabbit-backoff needs: `use rabbit_backoff::prelude::*;`.

pub use crate::{
    Classify, Consumer, ConsumerSpec, Context, Delays, ErrorClass, Outgoing, Publisher, Runtime,
    State, backoff_consumer,
};
