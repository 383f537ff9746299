//! The declaration model: the queues, exchanges and bindings a consumer
//! needs ([`Topology::of`] a [`ConsumerSpec`](crate::ConsumerSpec)), their
//! names, arguments and the dead-letter index beside them; declaring or
//! checking them on a broker, and discovering consumers from a broker's
//! definitions.

pub use rabbit_backoff_core::{
    Argument, ArgumentDifference, Binding, BindingDefinition, BindingListing, DeadLetterIndexDecl,
    Definitions, DelayedRetry, ExchangeDecl, ExchangeDefinition, FoundTopology, INDEX_MAX_BYTES,
    INDEX_REMOVALS_MAX_BYTES, INDEX_REMOVALS_SEGMENT_BYTES, INDEX_SEGMENT_BYTES, IndexFeed,
    NameError, NameOverrides, QueueDecl, QueueDefinition, QueueListing, Topology, TopologyNames,
    arguments, delayed_arguments, discover, validate_name,
};
pub use rabbit_backoff_runtime::{MissingObject, check_topology, declare_topology};
