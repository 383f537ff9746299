//! Every public path of the facade as of 42aa70d (before issue 30's renames:
//! the runtime's folders, the `dead_letters`, `topology` and `rules`
//! modules) still names an item: removing an old path, or
//! renaming it without a re-export, fails this test. Generated once from
//! that commit's `cargo doc` (`all.html` and its module list, with the
//! features `testing`, `postgres`, `redis`, `http` and `tls`; the items of
//! re-exported third-party crates, `lapin` and `dedupe::sqlx`, are named
//! by their module only).
#![allow(deprecated, unused_imports)]

// Modules (15).
use rabbit_backoff::arguments;
use rabbit_backoff::dedupe;
#[cfg(feature = "postgres")]
use rabbit_backoff::dedupe::sqlx;
use rabbit_backoff::deep_headers;
use rabbit_backoff::headers;
#[cfg(feature = "http")]
use rabbit_backoff::http;
use rabbit_backoff::lapin;
use rabbit_backoff::meters;
use rabbit_backoff::prelude;
#[cfg(feature = "testing")]
use rabbit_backoff::testing;
use rabbit_backoff::transport;
use rabbit_backoff::transport::amqp;
use rabbit_backoff::transport::lost;
use rabbit_backoff::transport::stream_offset;
use rabbit_backoff::transport::tls_error;

// Structs (87).
use rabbit_backoff::ArgumentDifference as _;
use rabbit_backoff::Attempt as _;
use rabbit_backoff::Binding as _;
use rabbit_backoff::BindingDefinition as _;
use rabbit_backoff::BindingListing as _;
use rabbit_backoff::BreakerSpec as _;
use rabbit_backoff::ConsumerSpec as _;
use rabbit_backoff::ConsumerStatus as _;
use rabbit_backoff::Context as _;
use rabbit_backoff::ContextBuilder as _;
use rabbit_backoff::DeadLetter as _;
use rabbit_backoff::DeadLetterFilter as _;
use rabbit_backoff::DeadLetterGroup as _;
use rabbit_backoff::DeadLetterIndexDecl as _;
use rabbit_backoff::DeadLetterMessage as _;
use rabbit_backoff::DeadLetterRecord as _;
use rabbit_backoff::DeadLetterReport as _;
use rabbit_backoff::Dedupe as _;
use rabbit_backoff::Definitions as _;
use rabbit_backoff::Delays as _;
use rabbit_backoff::Dlq as _;
use rabbit_backoff::ExchangeDecl as _;
use rabbit_backoff::ExchangeDefinition as _;
use rabbit_backoff::ExportReport as _;
use rabbit_backoff::FoundTopology as _;
use rabbit_backoff::GroupReport as _;
use rabbit_backoff::GroupTally as _;
use rabbit_backoff::HealthWatch as _;
use rabbit_backoff::Jitter as _;
use rabbit_backoff::MessageEdit as _;
use rabbit_backoff::MissingObject as _;
use rabbit_backoff::NameOverrides as _;
use rabbit_backoff::Outgoing as _;
use rabbit_backoff::Policy as _;
use rabbit_backoff::Publisher as _;
use rabbit_backoff::PurgeReport as _;
use rabbit_backoff::QueueDecl as _;
use rabbit_backoff::QueueDefinition as _;
use rabbit_backoff::QueueListing as _;
use rabbit_backoff::QueueStatus as _;
use rabbit_backoff::ReconnectBackoff as _;
use rabbit_backoff::ReconnectProbe as _;
use rabbit_backoff::RecordError as _;
use rabbit_backoff::RecordProperties as _;
use rabbit_backoff::ReplayOptions as _;
use rabbit_backoff::RetryCount as _;
use rabbit_backoff::ReturnWatch as _;
use rabbit_backoff::RunningRuntime as _;
use rabbit_backoff::Runtime as _;
use rabbit_backoff::RuntimeBuilder as _;
use rabbit_backoff::ShutdownHandle as _;
use rabbit_backoff::SkippedMessage as _;
use rabbit_backoff::State as _;
use rabbit_backoff::StateRequirement as _;
use rabbit_backoff::TierListing as _;
use rabbit_backoff::Topology as _;
use rabbit_backoff::TopologyNames as _;
use rabbit_backoff::WaitingMessage as _;
use rabbit_backoff::dedupe::ClaimRequest as _;
use rabbit_backoff::dedupe::Completed as _;
use rabbit_backoff::dedupe::MemoryStore as _;
#[cfg(feature = "postgres")]
use rabbit_backoff::dedupe::PostgresStore as _;
#[cfg(feature = "redis")]
use rabbit_backoff::dedupe::RedisStore as _;
#[cfg(feature = "postgres")]
use rabbit_backoff::dedupe::Transaction as _;
#[cfg(feature = "postgres")]
use rabbit_backoff::dedupe::Tx as _;
#[cfg(feature = "postgres")]
use rabbit_backoff::dedupe::TxConnection as _;
use rabbit_backoff::deep_headers::Entry as _;
use rabbit_backoff::deep_headers::Unpacked as _;
use rabbit_backoff::prelude::ConsumerSpec as _;
use rabbit_backoff::prelude::Context as _;
use rabbit_backoff::prelude::Delays as _;
use rabbit_backoff::prelude::Outgoing as _;
use rabbit_backoff::prelude::Publisher as _;
use rabbit_backoff::prelude::Runtime as _;
use rabbit_backoff::prelude::State as _;
use rabbit_backoff::transport::Acker as _;
use rabbit_backoff::transport::AmqpTransport as _;
use rabbit_backoff::transport::Deliveries as _;
use rabbit_backoff::transport::Delivery as _;
use rabbit_backoff::transport::Lost as _;
use rabbit_backoff::transport::LostSignal as _;
use rabbit_backoff::transport::QueueInfo as _;
use rabbit_backoff::transport::amqp::AmqpChannel as _;
use rabbit_backoff::transport::amqp::AmqpConnection as _;
use rabbit_backoff::transport::amqp::AmqpTransport as _;
use rabbit_backoff::transport::lost::Lost as _;
use rabbit_backoff::transport::lost::LostSignal as _;

// Enums (39).
use rabbit_backoff::Argument as _;
use rabbit_backoff::BreakerState as _;
use rabbit_backoff::CheckpointNote as _;
use rabbit_backoff::DeadLetterReason as _;
use rabbit_backoff::Decision as _;
use rabbit_backoff::DeclareMode as _;
use rabbit_backoff::DedupeKey as _;
use rabbit_backoff::DelayError as _;
use rabbit_backoff::Error as _;
use rabbit_backoff::ErrorClass as _;
use rabbit_backoff::ExchangeKind as _;
use rabbit_backoff::GroupSource as _;
use rabbit_backoff::HeaderValue as _;
use rabbit_backoff::Health as _;
use rabbit_backoff::IndexFallback as _;
use rabbit_backoff::KeyFate as _;
use rabbit_backoff::NameError as _;
use rabbit_backoff::NodeProbe as _;
use rabbit_backoff::Outcome as _;
use rabbit_backoff::ProbeVerdict as _;
use rabbit_backoff::PublishFailure as _;
use rabbit_backoff::QueueType as _;
use rabbit_backoff::RetryCountWarning as _;
use rabbit_backoff::RetryReturn as _;
use rabbit_backoff::SpecError as _;
use rabbit_backoff::TypedValue as _;
use rabbit_backoff::Verdict as _;
use rabbit_backoff::dedupe::Claim as _;
use rabbit_backoff::dedupe::StoreError as _;
use rabbit_backoff::deep_headers::TableError as _;
use rabbit_backoff::prelude::ErrorClass as _;
use rabbit_backoff::transport::Confirm as _;
use rabbit_backoff::transport::StreamOffset as _;
use rabbit_backoff::transport::TlsError as _;
use rabbit_backoff::transport::TransportError as _;
use rabbit_backoff::transport::Trusted as _;
use rabbit_backoff::transport::stream_offset::StreamOffset as _;
use rabbit_backoff::transport::tls_error::TlsError as _;
use rabbit_backoff::transport::tls_error::Trusted as _;

// Traits (11).
use rabbit_backoff::Classify as _;
use rabbit_backoff::Consumer as _;
use rabbit_backoff::FromContext as _;
use rabbit_backoff::dedupe::DedupeStore as _;
use rabbit_backoff::dedupe::HeldKey as _;
use rabbit_backoff::prelude::Classify as _;
use rabbit_backoff::prelude::Consumer as _;
use rabbit_backoff::transport::Channel as _;
use rabbit_backoff::transport::Connection as _;
use rabbit_backoff::transport::Settle as _;
use rabbit_backoff::transport::Transport as _;

// Functions (25).
use rabbit_backoff::amqp_url_from_env as _;
use rabbit_backoff::check_topology as _;
use rabbit_backoff::connect as _;
use rabbit_backoff::decide as _;
use rabbit_backoff::declare_topology as _;
use rabbit_backoff::deep_headers::entries as _;
use rabbit_backoff::deep_headers::pack as _;
use rabbit_backoff::deep_headers::table_depth as _;
use rabbit_backoff::deep_headers::unpack as _;
use rabbit_backoff::discover as _;
use rabbit_backoff::fingerprint as _;
use rabbit_backoff::group_id as _;
#[cfg(feature = "http")]
use rabbit_backoff::http::health_routes as _;
use rabbit_backoff::inbox_key as _;
use rabbit_backoff::index_key as _;
use rabbit_backoff::is_marker_queue as _;
use rabbit_backoff::list_retry_tier as _;
use rabbit_backoff::outbox_message_id as _;
use rabbit_backoff::parse_duration as _;
use rabbit_backoff::parse_failed_at as _;
use rabbit_backoff::read_retry_count as _;
use rabbit_backoff::status as _;
use rabbit_backoff::transport::header_view as _;
use rabbit_backoff::truncate_error as _;
use rabbit_backoff::validate_name as _;

// Attribute macros (2).
use rabbit_backoff::backoff_consumer as _;
use rabbit_backoff::prelude::backoff_consumer as _;

// Type aliases (1).
use rabbit_backoff::transport::PendingConfirm as _;

// Constants (67).
use rabbit_backoff::ATTRIBUTE_KEYS as _;
use rabbit_backoff::BODY_PREVIEW_LEN as _;
use rabbit_backoff::DEFAULT_AMQP_URL as _;
use rabbit_backoff::DEFAULT_INDEX_READERS as _;
use rabbit_backoff::FAILURE_HEADERS as _;
use rabbit_backoff::INDEX_MAX_BYTES as _;
use rabbit_backoff::INDEX_REMOVALS_MAX_BYTES as _;
use rabbit_backoff::INDEX_REMOVALS_SEGMENT_BYTES as _;
use rabbit_backoff::INDEX_SEGMENT_BYTES as _;
use rabbit_backoff::MAX_DELAY_MS as _;
use rabbit_backoff::MAX_ERROR_LEN as _;
use rabbit_backoff::MAX_HEADER_DEPTH as _;
use rabbit_backoff::MAX_JITTER_PERCENT as _;
use rabbit_backoff::MAX_TIERS as _;
use rabbit_backoff::MIN_PROBE_INTERVAL as _;
use rabbit_backoff::REPLAYED_AT as _;
use rabbit_backoff::REPLAY_HISTORY as _;
use rabbit_backoff::REPLAY_HISTORY_LIMIT as _;
use rabbit_backoff::SUB_QUEUES as _;
use rabbit_backoff::arguments::DEAD_LETTER_EXCHANGE as _;
use rabbit_backoff::arguments::DEAD_LETTER_ROUTING_KEY as _;
use rabbit_backoff::arguments::DEAD_LETTER_STRATEGY as _;
use rabbit_backoff::arguments::DELIVERY_LIMIT as _;
use rabbit_backoff::arguments::MAX_LENGTH_BYTES as _;
use rabbit_backoff::arguments::MESSAGE_TTL as _;
use rabbit_backoff::arguments::OVERFLOW as _;
use rabbit_backoff::arguments::QUEUE_TYPE as _;
use rabbit_backoff::arguments::STREAM as _;
use rabbit_backoff::arguments::STREAM_MAX_SEGMENT_SIZE_BYTES as _;
use rabbit_backoff::headers::DEAD_LETTER_REASON as _;
use rabbit_backoff::headers::DEEP_HEADERS as _;
use rabbit_backoff::headers::DROPPED_HEADERS as _;
use rabbit_backoff::headers::ERROR as _;
use rabbit_backoff::headers::FAILED_AT as _;
use rabbit_backoff::headers::FIRST_FAILED_AT as _;
use rabbit_backoff::headers::FRAMEWORK as _;
use rabbit_backoff::headers::INDEX_CHECKPOINT as _;
use rabbit_backoff::headers::INDEX_MARKER as _;
use rabbit_backoff::headers::ORIGINAL as _;
use rabbit_backoff::headers::ORIGINAL_BODY as _;
use rabbit_backoff::headers::ORIGINAL_EXCHANGE as _;
use rabbit_backoff::headers::ORIGINAL_HEADERS as _;
use rabbit_backoff::headers::ORIGINAL_QUEUE as _;
use rabbit_backoff::headers::ORIGINAL_ROUTING_KEY as _;
use rabbit_backoff::headers::PASS_SENTINEL as _;
use rabbit_backoff::headers::REPLAYED_AT as _;
use rabbit_backoff::headers::REPLAYED_BY as _;
use rabbit_backoff::headers::REPLAY_COUNT as _;
use rabbit_backoff::headers::REPLAY_HISTORY as _;
use rabbit_backoff::headers::RETRIED_AT as _;
use rabbit_backoff::headers::RETRY_COUNT as _;
use rabbit_backoff::headers::TOMBSTONE_LAYOUT as _;
use rabbit_backoff::meters::BREAKER_OPEN as _;
use rabbit_backoff::meters::CRITICAL_TIME as _;
use rabbit_backoff::meters::DEAD_LETTERED as _;
use rabbit_backoff::meters::DISCARDED as _;
use rabbit_backoff::meters::DUPLICATES_SKIPPED as _;
use rabbit_backoff::meters::HANDLED as _;
use rabbit_backoff::meters::HANDLER_DURATION as _;
use rabbit_backoff::meters::IMMEDIATE_RETRIES as _;
use rabbit_backoff::meters::IN_FLIGHT as _;
use rabbit_backoff::meters::RECONNECTS as _;
use rabbit_backoff::meters::RETRIED as _;
use rabbit_backoff::meters::WITHOUT_KEY as _;
use rabbit_backoff::transport::NOT_FOUND as _;
use rabbit_backoff::transport::PRECONDITION_FAILED as _;
use rabbit_backoff::transport::amqp::MAX_FRAME_SIZE as _;

// the testing crate re-exported as rabbit_backoff::testing (6).
#[cfg(feature = "testing")]
use rabbit_backoff::testing::Death as _;
#[cfg(feature = "testing")]
use rabbit_backoff::testing::IDLE_LIMIT as _;
#[cfg(feature = "testing")]
use rabbit_backoff::testing::Message as _;
#[cfg(feature = "testing")]
use rabbit_backoff::testing::QueueActivity as _;
#[cfg(feature = "testing")]
use rabbit_backoff::testing::StillBusy as _;
#[cfg(feature = "testing")]
use rabbit_backoff::testing::TestBroker as _;

fn main() {}
