//! What the console reads of the broker beside the dead-letter operations:
//! the exact depths of a consumer's queues (`depths`) on a connection kept
//! for them (`reader`). The consumers themselves are found through the
//! management API by `rabbit_backoff_dead_letters::discovery`.

pub(crate) mod depths;
pub(crate) mod reader;
