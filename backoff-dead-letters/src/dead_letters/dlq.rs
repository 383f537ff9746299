//! [`Dlq`]: one consumer's dead-letter queue, and the pass that peeks,
//! visits and discards its messages in place.

use crate::dead_letters::replay_options::ReplayOptions;
use crate::dead_letters::report::{DeadLetterReport, SkippedMessage};
use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff_core::{ConsumerSpec, QueueType, TopologyNames};

use crate::dead_letters::filter::DeadLetterFilter;
use crate::dead_letters::message::DeadLetterMessage;
use crate::dead_letters::pass::Pass;
pub use crate::dead_letters::stream_protocol::DEFAULT_STREAM_PORT;
use crate::dead_letters::stream_protocol::StreamEndpoint;

use crate::dead_letters::tombstones::Tombstones;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{CopyPublisher, inspect_queue};
use rabbit_backoff_runtime::transport::{AmqpTransport, Connection, Delivery, Transport};

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
pub struct Dlq {
    pub(super) connection: Arc<dyn Connection>,
    pub(super) names: TopologyNames,
    pub(super) quorum: bool,
    pub(super) confirm_timeout: Duration,
    pub(super) use_index: bool,
    pub(super) index_readers: usize,
    /// The AMQP URL of the node it is connected to, when it connected with
    /// one (the stream protocol's host, user and virtual host).
    pub(super) amqp_uri: Option<String>,
    /// The other nodes of the comma-separated list given to
    /// [`connect`](Self::connect): an index read that fails on the node of
    /// its connection (a stream without a running replica there, which
    /// AMQP 0-9-1 reads from) is tried through each of them.
    pub(super) other_nodes: Vec<String>,
    pub(super) stream_port: u16,
    pub(super) stream_protocol: bool,
}

/// Channels that read the dead-letter index's entries at once, by default
/// ([`Dlq::index_readers`]).
pub const DEFAULT_INDEX_READERS: usize = 2;

pub(super) enum Mode<'a> {
    Peek,
    Replay(&'a ReplayOptions),
    Discard,
}

/// What a scan does with each matching message besides its mode: keep its
/// summary for the report, or hand it to a caller that aggregates or writes
/// it out (in constant memory).
pub(super) enum Sink<'a> {
    Collect,
    Visit(&'a mut (dyn FnMut(&Delivery, &DeadLetterMessage) -> Result<(), Error> + Send)),
}

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
        })
    }

    /// The dead-letter queue's name.
    pub fn dead_letter_queue(&self) -> &str {
        &self.names.dead_letter_queue
    }

    /// The messages that match, without removing any or changing their order
    /// (their `redelivered` flag is set by the broker).
    pub async fn peek(&self, filter: &DeadLetterFilter) -> Result<DeadLetterReport, Error> {
        self.scan(filter, Mode::Peek, Sink::Collect).await
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
    pub(super) fn stream_endpoint(&self) -> Option<StreamEndpoint> {
        if !self.stream_protocol {
            return None;
        }
        StreamEndpoint::of(self.amqp_uri.as_deref()?, self.stream_port)
    }

    /// Calls `visit` with each matching message, whole, and its summary,
    /// without removing any or changing their order; an error from `visit`
    /// stops the scan (the messages all stay). The returned report lists no
    /// messages, only how many there were.
    pub async fn visit(
        &self,
        filter: &DeadLetterFilter,
        visit: &mut (dyn FnMut(&Delivery, &DeadLetterMessage) -> Result<(), Error> + Send),
    ) -> Result<DeadLetterReport, Error> {
        self.scan(filter, Mode::Peek, Sink::Visit(visit)).await
    }

    /// Removes the matching messages for good.
    pub async fn discard(&self, filter: &DeadLetterFilter) -> Result<DeadLetterReport, Error> {
        self.scan(filter, Mode::Discard, Sink::Collect).await
    }

    /// Closes the connection; an operation under way stops, and every message
    /// it had not settled returns to the dead-letter queue.
    pub async fn close(&self) {
        self.connection.close().await;
    }

    /// One pass over the queue (see [`Pass`]): applies `mode` to the
    /// matching messages and keeps every other one at its place.
    pub(super) async fn scan(
        &self,
        filter: &DeadLetterFilter,
        mode: Mode<'_>,
        mut sink: Sink<'_>,
    ) -> Result<DeadLetterReport, Error> {
        let queue = self.names.dead_letter_queue.clone();
        let mut pass = Pass::open(Arc::clone(&self.connection), &queue, self.quorum).await?;
        let settler = match mode {
            Mode::Replay(_) => Some(
                CopyPublisher::open(Arc::clone(&self.connection), &queue, self.confirm_timeout)
                    .await?,
            ),
            _ => None,
        };
        let mut tombstones = Tombstones::new(&self.names);
        let outcome = self
            .apply(
                &mut pass,
                settler.as_ref(),
                filter,
                &mode,
                &mut sink,
                &mut tombstones,
            )
            .await;
        if let Some(settler) = settler {
            settler.close().await;
        }
        let (matched, skipped, removed) = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                // Every unsettled message returns as the channel closes.
                pass.abort().await;
                // Some removals may have been settled: their tombstones are
                // written; where a message came back after all, the index
                // no longer counts what the queue holds, and reading it
                // falls back to a pass.
                self.write_tombstones(tombstones).await;
                return Err(e);
            }
        };
        let total = pass.total();
        let finished = pass.finish().await;
        self.write_tombstones(tombstones).await;
        finished?;
        let kept = total.saturating_sub(removed);
        self.wait_until_returned(&queue, kept).await?;
        Ok(DeadLetterReport {
            matched,
            kept,
            skipped,
        })
    }

    /// The body of a pass: each message is matched, applied and kept or
    /// removed; stops early when the limit is reached and stopping costs
    /// nothing.
    pub(super) async fn apply(
        &self,
        pass: &mut Pass,
        settler: Option<&CopyPublisher>,
        filter: &DeadLetterFilter,
        mode: &Mode<'_>,
        sink: &mut Sink<'_>,
        tombstones: &mut Tombstones,
    ) -> Result<(Vec<DeadLetterMessage>, Vec<SkippedMessage>, usize), Error> {
        let queue = &self.names.dead_letter_queue;
        let interval = match mode {
            Mode::Replay(ReplayOptions {
                rate: Some(rate), ..
            }) if *rate > 0.0 => Some(Duration::from_secs_f64(1.0 / rate)),
            _ => None,
        };
        let mut next_publish = tokio::time::Instant::now();
        let mut matched = Vec::new();
        let mut count = 0;
        let mut skipped = Vec::new();
        let mut removed = 0;
        let mut position = 0;
        loop {
            let limit_reached = filter.limit.is_some_and(|limit| count >= limit);
            if limit_reached && pass.can_stop() {
                break;
            }
            let Some(delivery) = pass.next().await? else {
                break;
            };
            position += 1;
            let summary = DeadLetterMessage::of(&delivery, position - 1);
            if limit_reached || !filter.matches_with_body(&summary, &delivery.data) {
                pass.keep(delivery).await?;
                continue;
            }
            count += 1;
            match mode {
                Mode::Peek => {
                    if let Sink::Visit(visit) = sink {
                        visit(&delivery, &summary)?;
                    }
                    pass.keep(delivery).await?;
                }
                Mode::Discard => {
                    tombstones.add(&delivery.properties, &summary.group);
                    pass.remove(delivery).await?;
                    removed += 1;
                }
                Mode::Replay(options) => {
                    if let Some(interval) = interval {
                        tokio::time::sleep_until(next_publish).await;
                        next_publish = tokio::time::Instant::now() + interval;
                    }
                    let settler = settler.expect("a replay has a settler");
                    if let Err(reason) = self.republish(settler, &delivery, options).await? {
                        tracing::warn!("{queue}: message {} stays: {reason}", position - 1);
                        skipped.push(SkippedMessage {
                            message: summary,
                            reason,
                        });
                        count -= 1;
                        pass.keep(delivery).await?;
                        continue;
                    }
                    tombstones.add(&delivery.properties, &summary.group);
                    pass.remove(delivery).await?;
                    removed += 1;
                }
            }
            if let Sink::Collect = sink {
                matched.push(summary);
            }
        }
        Ok((matched, skipped, removed))
    }

    /// Writes the tombstones of what a pass removed; a failure is logged
    /// (the index then no longer counts what the queue holds, and reading
    /// it falls back to a pass).
    pub(super) async fn write_tombstones(&self, tombstones: Tombstones) {
        if let Err(e) = tombstones.write(&*self.connection).await {
            tracing::warn!(
                "{}: the dead-letter index's tombstones were not written ({e}); `dlq groups` \
                 reads the queue until the index counts it again",
                self.names.dead_letter_queue
            );
        }
    }

    /// A classic queue takes returned messages back as the channel closes;
    /// wait (up to 10 s) until they are ready again, so that the next
    /// operation sees them.
    pub(super) async fn wait_until_returned(&self, queue: &str, kept: usize) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let ready = inspect_queue(&*self.connection, queue)
                .await?
                .map_or(0, |(messages, _)| messages);
            if ready as usize >= kept || tokio::time::Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
