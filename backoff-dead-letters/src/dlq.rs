//! [`Dlq`]: one consumer's dead-letter queue, how to reach it and how to
//! read its index. What it does is in `passes` (peek, visit, discard,
//! replay, export, import, purge) and `group_report` (its groups).

use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;
use rabbit_backoff_core::{ConsumerSpec, QueueType, TopologyNames};
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::transport::{AmqpTransport, Connection, Transport};

pub use crate::index::stream_protocol::DEFAULT_STREAM_PORT;
use crate::index::stream_protocol::StreamEndpoint;
use crate::replay_job::job_lock::ReplayLocks;

/// Operations on one consumer's dead-letter queue: look at it, replay
/// messages once their cause is fixed, discard them. Nothing is lost: a
/// message leaves the queue only after its replayed copy is confirmed, and the
/// messages an operation does not apply to keep their order.
///
/// ```no_run
/// # async fn demo() -> Result<(), rabbit_backoff::Error> {
/// use rabbit_backoff::ConsumerSpec;
/// use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, ReplayOptions};
///
/// let spec = ConsumerSpec::new("orders", "5s,15s,60s".parse().unwrap());
/// let dlq = Dlq::connect("amqp://guest:guest@127.0.0.1:5672/%2f", &spec).await?;
/// for message in dlq.peek(&DeadLetterFilter::default()).await?.matched {
///     println!("{:?}: {:?}", message.message_id, message.error);
/// }
/// let filter = DeadLetterFilter::default().error("database unavailable").unwrap();
/// let report = dlq.replay(&filter, &ReplayOptions::default()).await?;
/// println!("replayed {}", report.matched.len());
/// # Ok(()) }
/// ```
///
/// A `Dlq` is a handle: its clones share one connection (a replay job
/// keeps one while it runs), and [`close`](Self::close) closes it for all.
#[derive(Clone)]
pub struct Dlq {
    pub(crate) connection: Arc<dyn Connection>,
    pub(crate) names: TopologyNames,
    pub(crate) quorum: bool,
    pub(crate) confirm_timeout: Duration,
    pub(crate) use_index: bool,
    pub(crate) index_readers: usize,
    /// The AMQP URL of the node it is connected to, when it connected with
    /// one (the stream protocol's host, user and virtual host).
    pub(crate) amqp_uri: Option<String>,
    /// The other nodes of the comma-separated list given to
    /// [`connect`](Self::connect): an index read that fails on the node of
    /// its connection (a stream without a running replica there, which
    /// AMQP 0-9-1 reads from) is tried through each of them.
    pub(crate) other_nodes: Vec<String>,
    pub(crate) stream_port: u16,
    pub(crate) stream_protocol: bool,
    /// The replay locks this connection holds (its clones' jobs): the
    /// broker lets their owner declare them again, so a job of this
    /// connection is found here.
    pub(crate) replay_locks: ReplayLocks,
}

/// Channels that read the dead-letter index's entries at once, by default
/// ([`Dlq::index_readers`]).
pub const DEFAULT_INDEX_READERS: usize = 2;

impl Dlq {
    /// Connects to the broker for the consumer described by `spec`.
    pub async fn connect(uri: &str, spec: &ConsumerSpec) -> Result<Self, Error> {
        let mut dlq = Self::with_transport(AmqpTransport::new(uri), spec).await?;
        // The node it connected to, of the comma-separated list.
        let node = dlq.connection.node();
        let uris: Vec<&str> = uri
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .collect();
        dlq.amqp_uri = uris
            .iter()
            .find(|u| {
                u.parse::<lapin::uri::AMQPUri>().is_ok_and(|parsed| {
                    node.contains(&format!(
                        "{}:{}",
                        parsed.authority.host, parsed.authority.port
                    ))
                })
            })
            .or(uris.first())
            .map(|u| (*u).to_owned());
        dlq.other_nodes = uris
            .iter()
            .filter(|u| dlq.amqp_uri.as_deref() != Some(**u))
            .map(|u| (*u).to_owned())
            .collect();
        Ok(dlq)
    }

    /// Connects through `transport` (such as the in-memory broker of
    /// `rabbit_backoff::testing`) for the consumer described by `spec`.
    pub async fn with_transport(
        transport: impl Transport,
        spec: &ConsumerSpec,
    ) -> Result<Self, Error> {
        let connection = transport.connect().await.map_err(|source| Error::Connect {
            uri: transport.describe(),
            source,
        })?;
        Ok(Dlq {
            connection,
            names: spec.names(),
            quorum: spec.effective_queue_type() == QueueType::Quorum,
            confirm_timeout: Duration::from_secs(30),
            use_index: true,
            index_readers: DEFAULT_INDEX_READERS,
            amqp_uri: None,
            other_nodes: Vec::new(),
            stream_port: DEFAULT_STREAM_PORT,
            stream_protocol: true,
            replay_locks: ReplayLocks::default(),
        })
    }

    /// The dead-letter queue's name.
    pub fn dead_letter_queue(&self) -> &str {
        &self.names.dead_letter_queue
    }

    /// Whether [`groups`](Self::groups) reads the dead-letter index when
    /// there is one (the default), or always a pass over the queue.
    ///
    /// ```no_run
    /// # async fn demo(spec: rabbit_backoff::ConsumerSpec) -> Result<(), rabbit_backoff::Error> {
    /// use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, GroupSource};
    ///
    /// let dlq = Dlq::connect("amqp://guest:guest@127.0.0.1:5672/%2f", &spec)
    ///     .await?
    ///     .use_index(false);
    /// let report = dlq.group_report(&DeadLetterFilter::default()).await?;
    /// assert_eq!(report.source, GroupSource::Pass);
    /// # Ok(()) }
    /// ```
    pub fn use_index(mut self, use_index: bool) -> Self {
        self.use_index = use_index;
        self
    }

    /// How many channels read the dead-letter index's entries at once
    /// (default [`DEFAULT_INDEX_READERS`]; 0 counts as 1), each a range of
    /// the entries' stream. The broker turns a stream's messages into
    /// deliveries in the process of the channel that reads them, so one
    /// channel reads at most as fast as one of the broker's cores: more
    /// channels use more of them, for an index of 10 000 entries a channel
    /// or more. The groups are the same whatever the number.
    ///
    /// ```no_run
    /// # async fn demo(spec: rabbit_backoff::ConsumerSpec) -> Result<(), rabbit_backoff::Error> {
    /// use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq};
    ///
    /// // A broker with cores to spare.
    /// let dlq = Dlq::connect("amqp://guest:guest@127.0.0.1:5672/%2f", &spec)
    ///     .await?
    ///     .index_readers(4);
    /// let groups = dlq.groups(&DeadLetterFilter::default()).await?;
    /// # Ok(()) }
    /// ```
    pub fn index_readers(mut self, readers: usize) -> Self {
        self.index_readers = readers.max(1);
        self
    }

    /// Whether a read of the dead-letter index reads its entries over
    /// RabbitMQ's stream protocol (the default) rather than AMQP 0-9-1. The
    /// broker sends a stream's chunks over the stream protocol as they are
    /// stored, instead of turning each message into a delivery: a large
    /// index reads several times cheaper for the broker. It needs the
    /// broker's `rabbitmq_stream` plugin on [`stream_port`](Self::stream_port),
    /// reached with the host, user, password and virtual host of the AMQP
    /// URL given to [`connect`](Self::connect); where the port does not
    /// answer or refuses, with an `amqps://` URL (TLS over the stream
    /// protocol is not supported), or a `Dlq` made
    /// [`with_transport`](Self::with_transport), the index is read over
    /// AMQP. The groups are the same either way
    /// ([`GroupReport::index_protocol`](crate::GroupReport::index_protocol)
    /// says which was used).
    ///
    /// ```no_run
    /// # async fn demo(spec: rabbit_backoff::ConsumerSpec) -> Result<(), rabbit_backoff::Error> {
    /// use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq};
    ///
    /// let dlq = Dlq::connect("amqp://guest:guest@127.0.0.1:5672/%2f", &spec)
    ///     .await?
    ///     .stream_protocol(false);
    /// let groups = dlq.groups(&DeadLetterFilter::default()).await?;
    /// # Ok(()) }
    /// ```
    pub fn stream_protocol(mut self, stream_protocol: bool) -> Self {
        self.stream_protocol = stream_protocol;
        self
    }

    /// The port of the broker's stream protocol (default
    /// [`DEFAULT_STREAM_PORT`], 5552), on the AMQP URL's host: see
    /// [`stream_protocol`](Self::stream_protocol).
    ///
    /// ```no_run
    /// # async fn demo(spec: rabbit_backoff::ConsumerSpec) -> Result<(), rabbit_backoff::Error> {
    /// use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq};
    ///
    /// let dlq = Dlq::connect("amqp://guest:guest@127.0.0.1:5643/%2f", &spec)
    ///     .await?
    ///     .stream_port(55643);
    /// let report = dlq.group_report(&DeadLetterFilter::default()).await?;
    /// println!("{:?}", report.index_protocol());
    /// # Ok(()) }
    /// ```
    pub fn stream_port(mut self, port: u16) -> Self {
        self.stream_port = port;
        self
    }

    /// Where the index is read over the stream protocol, when it is.
    pub(crate) fn stream_endpoint(&self) -> Option<StreamEndpoint> {
        if !self.stream_protocol {
            return None;
        }
        StreamEndpoint::of(self.amqp_uri.as_deref()?, self.stream_port)
    }

    /// Closes the connection; an operation under way stops, and every message
    /// it had not settled returns to the dead-letter queue.
    pub async fn close(&self) {
        self.connection.close().await;
    }
}

impl Dlq {
    /// Writes an entry of the dead-letter index for each of these dead
    /// letters (the properties each was published with, and the size of its
    /// body), as the consumer does for each dead letter it makes once the
    /// broker confirmed it in the queue: for dead letters that reached the
    /// queue another way (a hand-written tool, a test's own), so that
    /// `groups` still answers from the index. How many entries were
    /// written: none when the queue has no index. A dead letter whose
    /// headers were set aside (they nest too deep) gets none, as the
    /// consumer's would, and the count check finds it.
    ///
    /// ```no_run
    /// # async fn demo(dlq: rabbit_backoff::dead_letters::Dlq, properties: lapin::BasicProperties) -> Result<(), rabbit_backoff::Error> {
    /// // A dead letter of 1 KiB published to the dead-letter exchange, confirmed:
    /// dlq.write_index_entries([(&properties, 1024)]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn write_index_entries<'a>(
        &self,
        dead_letters: impl IntoIterator<Item = (&'a BasicProperties, usize)>,
    ) -> Result<usize, Error> {
        let entries = dead_letters
            .into_iter()
            .filter_map(|(properties, body_len)| {
                rabbit_backoff_runtime::toolkit::index_entry(properties, body_len)
            });
        crate::index::entry_writer::EntryWriter::write_all(&*self.connection, &self.names, entries)
            .await
    }
}
