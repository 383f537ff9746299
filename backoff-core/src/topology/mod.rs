//! [`Topology`]: the exchanges, queues and bindings a consumer declares,
//! with their arguments.

mod argument;
pub mod arguments;
mod binding;
mod consumer_topology;
mod dead_letter_index_decl;
mod exchange_decl;
mod queue_decl;
#[cfg(test)]
mod tests;

pub use argument::Argument;
pub use binding::Binding;
pub use consumer_topology::{DEAD_LETTER_DELIVERY_LIMIT, Topology};
pub use dead_letter_index_decl::{
    DeadLetterIndexDecl, INDEX_MAX_BYTES, INDEX_REMOVALS_MAX_BYTES, INDEX_REMOVALS_SEGMENT_BYTES,
    INDEX_SEGMENT_BYTES,
};
pub use exchange_decl::ExchangeDecl;
pub use queue_decl::{ArgumentDifference, QueueDecl};
