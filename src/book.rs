//! The README and the book's pages (`docs/`), compiled only for doctests so
//! that every `rust` code block in them is built (and, unless `no_run`, run)
//! by `cargo test --doc`: an example that stops compiling fails the tests.

/// README.md: what the crate is, a consumer and a test.
#[doc = include_str!("../README.md")]
pub struct Readme;

/// docs/README.md: the book's contents.
#[doc = include_str!("../docs/README.md")]
pub struct Contents;

/// docs/attributes.md: the attribute's keys and the error's markers.
#[doc = include_str!("../docs/attributes.md")]
pub struct Attributes;

/// docs/topology.md: what a consumer declares.
#[doc = include_str!("../docs/topology.md")]
pub struct Topology;

/// docs/one-message.md: what happens to one message.
#[doc = include_str!("../docs/one-message.md")]
pub struct OneMessage;

/// docs/guarantees.md: what is never lost, what can be duplicated.
#[doc = include_str!("../docs/guarantees.md")]
pub struct Guarantees;

/// docs/duplicates.md: the inbox and the outbox. Its example is PostgreSQL's
/// store, so it is built only with the feature `postgres` (which the
/// crate's own tests turn on).
#[cfg(feature = "postgres")]
#[doc = include_str!("../docs/duplicates.md")]
pub struct Duplicates;

/// docs/cluster.md: running on a cluster, network partitions.
#[doc = include_str!("../docs/cluster.md")]
pub struct Cluster;

/// docs/rabbitmq-versions.md: what differs between RabbitMQ 3.10, 4.0 and 4.3.
#[doc = include_str!("../docs/rabbitmq-versions.md")]
pub struct RabbitmqVersions;

/// docs/amqp-1.0.md: the AMQP 1.0 client and 4.3's held-back retry.
#[doc = include_str!("../docs/amqp-1.0.md")]
pub struct Amqp10;

/// docs/retry-backends.md: choosing tiers, delayed or scheduled.
#[doc = include_str!("../docs/retry-backends.md")]
pub struct RetryBackends;

/// docs/testing.md: the in-memory broker.
#[doc = include_str!("../docs/testing.md")]
pub struct Testing;

/// docs/metrics.md: metrics, health and traces.
#[doc = include_str!("../docs/metrics.md")]
pub struct Metrics;

/// docs/alerts.md: the Prometheus rules.
#[doc = include_str!("../docs/alerts.md")]
pub struct Alerts;

/// docs/dead-letters.md: operating dead letters, failures at scale.
#[doc = include_str!("../docs/dead-letters.md")]
pub struct DeadLetters;

/// docs/console.md: the web console.
#[doc = include_str!("../docs/console.md")]
pub struct Console;

/// docs/migrating.md: adopting a hand-written consumer's topology.
#[doc = include_str!("../docs/migrating.md")]
pub struct Migrating;

/// docs/publishing.md: the typed publisher.
#[doc = include_str!("../docs/publishing.md")]
pub struct Publishing;

/// docs/tls.md: `amqps://` addresses.
#[doc = include_str!("../docs/tls.md")]
pub struct Tls;

/// docs/upstream.md: what the framework works around upstream.
#[doc = include_str!("../docs/upstream.md")]
pub struct Upstream;

/// docs/layout.md: the workspace's crates.
#[doc = include_str!("../docs/layout.md")]
pub struct Layout;
