//! A consumer's configuration: the [`ConsumerSpec`], the [`SpecError`]s of
//! an invalid one, and the named settings it holds (queue type, exchange
//! type, where a retry returns, the declare mode).
mod declare_mode;
mod exchange_kind;
mod held_retries;
mod queue_type;
mod retry_return;
mod spec;
mod spec_error;

pub use declare_mode::DeclareMode;
pub use exchange_kind::ExchangeKind;
pub use queue_type::QueueType;
pub use retry_return::RetryReturn;
pub use spec::ConsumerSpec;
pub use spec_error::SpecError;

#[cfg(test)]
mod tests;
