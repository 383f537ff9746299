//! The replay log's stream: its name and retention.

use crate::names::TopologyNames;
use crate::topology::{Argument, QueueDecl, arguments as arg};

/// The retention of a replay log (`x-max-length-bytes`): 256 MiB, about a
/// million copies' records and fates.
pub const REPLAY_LOG_MAX_BYTES: i64 = 256 << 20;

/// How long a replay log keeps its records: a week after its segment is
/// full.
pub const REPLAY_LOG_MAX_AGE: &str = "7D";

/// The replay log of the dead-letter queue of `names`: a stream
/// ([`TopologyNames::replay_log`]) that the first replay job declares.
///
/// ```
/// use rabbit_backoff::topology::{Argument, NameOverrides, TopologyNames};
/// use rabbit_backoff::rules::replay_log_decl;
///
/// let names = TopologyNames::resolve("orders", &NameOverrides::default());
/// let log = replay_log_decl(&names);
/// assert_eq!(log.name, "orders.dlq.replays");
/// assert_eq!(log.argument("x-queue-type"), Some(&Argument::Str("stream".into())));
/// ```
pub fn replay_log_decl(names: &TopologyNames) -> QueueDecl {
    QueueDecl::new(names.replay_log())
        .with_argument(arg::QUEUE_TYPE, Argument::Str(arg::STREAM.to_owned()))
        .with_argument(arg::MAX_LENGTH_BYTES, Argument::Int(REPLAY_LOG_MAX_BYTES))
        .with_argument(
            arg::STREAM_MAX_SEGMENT_SIZE_BYTES,
            Argument::Int(REPLAY_LOG_MAX_BYTES / 16),
        )
        .with_argument(arg::MAX_AGE, Argument::Str(REPLAY_LOG_MAX_AGE.to_owned()))
}
