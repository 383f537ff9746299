use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use rabbit_backoff_core::{
    ConsumerSpec, FAILURE_HEADERS, HeaderValue, QueueType, REPLAY_HISTORY, REPLAYED_AT,
    TopologyNames, broker_headroom, headers, history_overflow, read_retry_count, replay_target,
};
use serde::Serialize;

use crate::operations::dead_letters::checkpoint::{
    CheckpointWriter, entries_offset, write as write_checkpoint,
};
use crate::operations::dead_letters::checkpoint_note::CheckpointNote;
use crate::operations::dead_letters::edit::MessageEdit;
use crate::operations::dead_letters::filter::DeadLetterFilter;
use crate::operations::dead_letters::group::{DeadLetterGroup, GroupTally};
use crate::operations::dead_letters::group_report::{GroupReport, GroupSource};
use crate::operations::dead_letters::index::{index_exists, index_groups};
use crate::operations::dead_letters::index_fallback::IndexFallback;
use crate::operations::dead_letters::message::DeadLetterMessage;
use crate::operations::dead_letters::pass::Pass;
use crate::operations::dead_letters::purge_report::PurgeReport;
use crate::operations::dead_letters::record::DeadLetterRecord;
use crate::operations::dead_letters::tombstones::Tombstones;
use crate::settle::copy::{now_rfc3339, republish_properties};
use crate::settle::settlement::{Settler, Target};
use crate::settle::trace_context::link_trace;
use crate::transport::amqp::AmqpTransport;
use crate::transport::error::{Error, channel_error};
use crate::transport::frame_guard::SetAside;
use crate::transport::inspect::inspect_queue;
use crate::transport::open::confirm_channel;
use crate::transport::values::header_view;
use crate::transport::{Confirm, Connection, Delivery, Transport, TransportError};
use tracing::Instrument;

/// Where and how fast [`Dlq::replay`] moves messages.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// The exchange to publish to (default: the default exchange, which routes
    /// straight to the work queue the message failed in).
    pub to_exchange: Option<String>,
    /// The routing key (default: the work queue the message failed in).
    pub to_routing_key: Option<String>,
    /// At most this many messages a second.
    pub rate: Option<f64>,
    /// Only report what would move.
    pub dry_run: bool,
    /// Who asked, written into each copy's `x-replay-history` entry as
    /// `x-replayed-by`.
    pub by: Option<String>,
    /// A change made to each copy (meant for one message), the original
    /// kept in its history entry.
    pub edit: Option<MessageEdit>,
}

/// What an operation did.
#[derive(Debug, Clone, Serialize)]
pub struct DeadLetterReport {
    /// The messages it applied to (peeked, replayed, discarded, or that a dry
    /// run would replay).
    pub matched: Vec<DeadLetterMessage>,
    /// The messages left in the dead-letter queue, in their order.
    pub kept: usize,
    /// Matching messages a replay left in the dead-letter queue because no
    /// copy of them can be published, each with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedMessage>,
}

/// A dead letter that a replay could not copy, and stays where it is.
#[derive(Debug, Clone, Serialize)]
pub struct SkippedMessage {
    /// The message.
    pub message: DeadLetterMessage,
    /// Why no copy could be published.
    pub reason: String,
}

/// Operations on one consumer's dead-letter queue: look at it, replay
/// messages once their cause is fixed, discard them. Nothing is lost: a
/// message leaves the queue only after its replayed copy is confirmed, and the
/// messages an operation does not apply to keep their order.
///
/// ```no_run
/// # async fn demo() -> Result<(), rabbit_backoff::Error> {
/// use rabbit_backoff::ConsumerSpec;
/// use rabbit_backoff::{DeadLetterFilter, Dlq, ReplayOptions};
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
    connection: Arc<dyn Connection>,
    names: TopologyNames,
    quorum: bool,
    confirm_timeout: Duration,
    use_index: bool,
    index_readers: usize,
}

/// Channels that read the dead-letter index's entries at once, by default
/// ([`Dlq::index_readers`]).
pub const DEFAULT_INDEX_READERS: usize = 2;

enum Mode<'a> {
    Peek,
    Replay(&'a ReplayOptions),
    Discard,
}

/// What a scan does with each matching message besides its mode: keep its
/// summary for the report, or hand it to a caller that aggregates or writes
/// it out (in constant memory).
enum Sink<'a> {
    Collect,
    Visit(&'a mut (dyn FnMut(&Delivery, &DeadLetterMessage) -> Result<(), Error> + Send)),
}

impl Dlq {
    /// Connects to the broker for the consumer described by `spec`.
    pub async fn connect(uri: &str, spec: &ConsumerSpec) -> Result<Self, Error> {
        Self::with_transport(AmqpTransport::new(uri), spec).await
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
            quorum: spec.queue_type == QueueType::Quorum,
            confirm_timeout: Duration::from_secs(30),
            use_index: true,
            index_readers: DEFAULT_INDEX_READERS,
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
    /// use rabbit_backoff::{DeadLetterFilter, Dlq, GroupSource};
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
    /// use rabbit_backoff::{DeadLetterFilter, Dlq};
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

    /// The matching messages grouped by reason and error fingerprint, largest
    /// group first, without removing any or changing their order: from the
    /// dead-letter index when it describes the queue, else from a pass
    /// ([`group_report`](Self::group_report) says which).
    pub async fn groups(&self, filter: &DeadLetterFilter) -> Result<Vec<DeadLetterGroup>, Error> {
        Ok(self.group_report(filter).await?.groups)
    }

    /// [`groups`](Self::groups), with where they were read from.
    ///
    /// The dead-letter index (two streams beside the queue, see
    /// [`DeadLetterIndexDecl`](rabbit_backoff_core::DeadLetterIndexDecl))
    /// is read when it exists: the entries the broker wrote as it
    /// dead-lettered each message, less the tombstones the operator tools
    /// wrote for what they removed, grouped as a pass groups them, without
    /// touching the queue. Then the count check: when the live entries are
    /// not as many as the queue's ready messages (the index's retention
    /// dropped some; messages left without a tombstone, by a purge, a
    /// `basic.get`, a length limit, a shovel; or arrived without the
    /// dead-letter exchange), the index does not describe the queue, and a
    /// pass reads it instead ([`GroupReport::fallback`] says why, and a
    /// `tracing` line too). A filter with a `limit` is always a pass.
    ///
    /// The blind spot: a removal that writes no tombstone and an arrival
    /// that writes no entry cancel out in the count, and the index then
    /// groups the message that left instead of the one that came, until
    /// either leaves the queue through a pass.
    pub async fn group_report(&self, filter: &DeadLetterFilter) -> Result<GroupReport, Error> {
        let fallback = if self.use_index {
            match index_groups(&*self.connection, &self.names, filter, self.index_readers).await {
                Ok(read) => {
                    return Ok(GroupReport {
                        groups: read.groups,
                        source: GroupSource::Index,
                        fallback: None,
                        checkpoint: read
                            .checkpoint
                            .map(|offset| CheckpointNote::ReadFrom { offset }),
                    });
                }
                Err(why) => why,
            }
        } else {
            IndexFallback::NotAsked
        };
        if !matches!(fallback, IndexFallback::Absent | IndexFallback::NotAsked) {
            tracing::info!(
                "{}: grouping with a pass over the queue: {fallback}",
                self.names.dead_letter_queue
            );
        }
        // An index out of step gets a checkpoint from this pass, so that the
        // next read answers from the index again (a limited read never gets
        // here: it is always a pass, and sees only part of the queue).
        let heal =
            matches!(fallback, IndexFallback::CountMismatch { .. }) && filter.limit.is_none();
        self.pass_report(filter, fallback, heal).await
    }

    /// Reads the whole dead-letter queue with a pass and leaves a
    /// checkpoint of the dead-letter index from it, whether or not the
    /// index was in step: the next [`group_report`](Self::group_report)
    /// starts from that checkpoint and reads only the entries written
    /// after it. What an operator runs after changing the queue behind the
    /// tools' back (or to shorten the index's reads); a read that finds
    /// the index out of step does the same by itself.
    ///
    /// The report's groups are every dead letter's, its
    /// [`fallback`](GroupReport::fallback) is
    /// [`IndexFallback::Rebuild`], and its
    /// [`checkpoint`](GroupReport::checkpoint) says whether one was written.
    /// Without an index beside the queue, nothing is read: the report has no
    /// groups, [`IndexFallback::Absent`] and no checkpoint.
    ///
    /// What it costs: a checkpoint keeps each group's count, not its
    /// messages, so a read with a filter other than `group` is a pass until
    /// the checkpoint's dead letters have left the queue
    /// ([`IndexFallback::FilterPastCheckpoint`]).
    ///
    /// ```no_run
    /// # async fn demo(dlq: rabbit_backoff::Dlq) -> Result<(), rabbit_backoff::Error> {
    /// let report = dlq.rebuild_index().await?;
    /// println!("{}", report.reason());
    /// # Ok(()) }
    /// ```
    pub async fn rebuild_index(&self) -> Result<GroupReport, Error> {
        if !index_exists(&*self.connection, &self.names).await? {
            return Ok(GroupReport {
                groups: Vec::new(),
                source: GroupSource::Pass,
                fallback: Some(IndexFallback::Absent),
                checkpoint: None,
            });
        }
        tracing::info!(
            "{}: rebuilding the dead-letter index with a pass over the queue",
            self.names.dead_letter_queue
        );
        self.pass_report(&DeadLetterFilter::default(), IndexFallback::Rebuild, true)
            .await
    }

    /// The groups of what matches `filter`, read with a pass, which leaves
    /// a checkpoint of the index when `checkpoint_it` (then the pass reads
    /// every message, and the filter picks the groups).
    async fn pass_report(
        &self,
        filter: &DeadLetterFilter,
        fallback: IndexFallback,
        checkpoint_it: bool,
    ) -> Result<GroupReport, Error> {
        let mut writer = None;
        let mut checkpoint = None;
        if checkpoint_it {
            match CheckpointWriter::begin(&*self.connection, &self.names).await {
                Ok(began) => writer = Some(began),
                Err(e) => checkpoint = Some(self.not_written(&e)),
            }
        }
        let mut tally = GroupTally::default();
        let report = match &mut writer {
            // The checkpoint counts every message, the groups only those
            // that match.
            Some(writer) => {
                let mut add = |delivery: &Delivery, message: &DeadLetterMessage| {
                    writer.observe(delivery, message);
                    if filter.matches_with_body(message, &delivery.data) {
                        tally.add(message);
                    }
                    Ok(())
                };
                self.scan(
                    &DeadLetterFilter::default(),
                    Mode::Peek,
                    Sink::Visit(&mut add),
                )
                .await
            }
            None => {
                let mut add = |_: &Delivery, message: &DeadLetterMessage| {
                    tally.add(message);
                    Ok(())
                };
                self.scan(filter, Mode::Peek, Sink::Visit(&mut add)).await
            }
        };
        report?;
        if let Some(writer) = writer {
            checkpoint = Some(match writer.finish(&*self.connection).await {
                Ok(offset) => CheckpointNote::Written { offset },
                Err(e) => self.not_written(&e),
            });
        }
        Ok(GroupReport {
            groups: tally.into_groups(),
            source: GroupSource::Pass,
            fallback: Some(fallback),
            checkpoint,
        })
    }

    /// The note of a checkpoint that could not be written, logged.
    fn not_written(&self, e: &Error) -> CheckpointNote {
        tracing::warn!(
            "{}: no checkpoint of the dead-letter index ({e}); `dlq groups` reads the queue \
             until one is written",
            self.names.dead_letter_queue
        );
        CheckpointNote::NotWritten {
            reason: e.to_string(),
        }
    }

    /// Removes every ready message from the dead-letter queue at once
    /// (`queue.purge`: the broker drops them, no pass), and leaves an empty
    /// checkpoint in the dead-letter index, at the offset its entries'
    /// stream had just before the purge, so that `groups` answers from the
    /// index afterwards instead of finding it out of step. Messages held
    /// unacknowledged (by a consumer or a pass) stay. A dead letter that
    /// arrives between the checkpoint's offset and the purge is purged but
    /// counted by the index; the next read then falls back to a pass, which
    /// writes a checkpoint of its own.
    pub async fn purge(&self) -> Result<PurgeReport, Error> {
        let queue = &self.names.dead_letter_queue;
        let mut offset = None;
        let mut checkpoint = None;
        if index_exists(&*self.connection, &self.names).await? {
            match entries_offset(&*self.connection, &self.names).await {
                Ok(at) => offset = Some(at),
                Err(e) => checkpoint = Some(self.not_written(&e)),
            }
        }
        let channel = confirm_channel(&*self.connection, queue).await?;
        let purged = channel.purge_queue(queue).await;
        channel.close().await;
        let purged = purged.map_err(channel_error(queue, "purging the dead-letter queue"))?;
        if let Some(offset) = offset {
            let removals = self.names.dead_letter_index_removals();
            checkpoint = Some(
                match write_checkpoint(&*self.connection, &removals, offset, Vec::new()).await {
                    Ok(()) => CheckpointNote::Written { offset },
                    Err(e) => self.not_written(&e),
                },
            );
        }
        Ok(PurgeReport { purged, checkpoint })
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

    /// Publishes each matching message to its work queue (or the target of
    /// `options`) with `x-retry-count` reset to 0 and its failure headers moved
    /// into `x-replay-history`, every other property kept; acks it from the
    /// dead-letter queue only after the broker confirmed the copy.
    pub async fn replay(
        &self,
        filter: &DeadLetterFilter,
        options: &ReplayOptions,
    ) -> Result<DeadLetterReport, Error> {
        if options.dry_run {
            return self.scan(filter, Mode::Peek, Sink::Collect).await;
        }
        self.scan(filter, Mode::Replay(options), Sink::Collect)
            .await
    }

    /// Writes each matching message, whole, as one line of JSON (a
    /// [`DeadLetterRecord`]) to `out`, without removing any or changing
    /// their order. Messages whose headers nest deeper than
    /// [`MAX_HEADER_DEPTH`](rabbit_backoff_core::MAX_HEADER_DEPTH) are not
    /// written (they stay in the queue, intact); the report lists them.
    pub async fn export(
        &self,
        filter: &DeadLetterFilter,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<ExportReport, Error> {
        let mut exported = 0;
        let mut skipped = Vec::new();
        let mut write = |delivery: &Delivery, message: &DeadLetterMessage| {
            if let Some(set_aside) = SetAside::of(&delivery.properties) {
                skipped.push(SkippedMessage {
                    message: message.clone(),
                    reason: set_aside.to_string(),
                });
                return Ok(());
            }
            serde_json::to_writer(&mut *out, &DeadLetterRecord::of(delivery))
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|e| Error::Io {
                    action: "writing the export",
                    source: Arc::new(e),
                })?;
            exported += 1;
            Ok(())
        };
        let report = self
            .scan(filter, Mode::Peek, Sink::Visit(&mut write))
            .await?;
        out.flush().map_err(|e| Error::Io {
            action: "writing the export",
            source: Arc::new(e),
        })?;
        Ok(ExportReport {
            exported,
            skipped,
            kept: report.kept,
        })
    }

    /// Publishes each record to the dead-letter queue, exactly as exported
    /// (properties, header types, body), in order, each confirmed by the
    /// broker. The records go through the dead-letter exchange with the
    /// dead-letter routing key of the consumer's topology, the route its
    /// dead letters take, so that an export of the import names the same
    /// exchange and routing key as the records. A dead-letter exchange that
    /// is missing, or that does not route the key to the queue, stops the
    /// import with an error naming both (nothing is lost: a returned
    /// message is not enqueued).
    pub async fn import(
        &self,
        records: impl IntoIterator<Item = DeadLetterRecord>,
    ) -> Result<usize, Error> {
        let queue = self.names.dead_letter_queue.clone();
        let exchange = self.names.dead_letter_exchange.clone();
        let routing_key = self.names.dead_letter_routing_key.clone();
        let channel = confirm_channel(&*self.connection, &queue).await?;
        let failed = |source| Error::Channel {
            action: "importing dead letters",
            queue: queue.clone(),
            source,
        };
        let mut in_flight = std::collections::VecDeque::new();
        let mut imported = 0;
        let result = async {
            channel.check_exchange(&exchange).await.map_err(|e| {
                failed(TransportError::Other(format!(
                    "the dead-letter exchange '{exchange}' is not there to route the records \
                     through ({e})"
                )))
            })?;
            let route = |confirm: Result<Confirm, TransportError>| match confirm.map_err(failed)? {
                Confirm::Ack => Ok(()),
                Confirm::Returned => Err(failed(TransportError::Other(format!(
                    "the dead-letter exchange '{exchange}' routes no queue with the key \
                     '{routing_key}': bind '{queue}' to it with that key"
                )))),
                Confirm::Nack => Err(failed(TransportError::Other(
                    "the broker did not take a message (Nack)".to_owned(),
                ))),
            };
            for (line, record) in records.into_iter().enumerate() {
                let (properties, body) = record.message().map_err(|e| {
                    failed(TransportError::Other(format!("record {}: {e}", line + 1)))
                })?;
                let pending = channel
                    .send(&exchange, &routing_key, &body, properties)
                    .await
                    .map_err(failed)?;
                in_flight.push_back(pending);
                while in_flight.len() > IMPORT_WINDOW {
                    route(in_flight.pop_front().expect("non-empty").await)?;
                    imported += 1;
                }
            }
            while let Some(pending) = in_flight.pop_front() {
                route(pending.await)?;
                imported += 1;
            }
            Ok(())
        }
        .await;
        channel.close().await;
        result.map(|()| imported)
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
    async fn scan(
        &self,
        filter: &DeadLetterFilter,
        mode: Mode<'_>,
        mut sink: Sink<'_>,
    ) -> Result<DeadLetterReport, Error> {
        let queue = self.names.dead_letter_queue.clone();
        let mut pass = Pass::open(Arc::clone(&self.connection), &queue, self.quorum).await?;
        let settler = match mode {
            Mode::Replay(_) => Some(Settler::new(
                confirm_channel(&*self.connection, &queue).await?,
                Arc::clone(&self.connection),
                self.confirm_timeout,
            )),
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
    async fn apply(
        &self,
        pass: &mut Pass,
        settler: Option<&Settler>,
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
    async fn write_tombstones(&self, tombstones: Tombstones) {
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
    async fn wait_until_returned(&self, queue: &str, kept: usize) -> Result<(), Error> {
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

    /// Publishes the replayed copy of `delivery`, confirmed; `Ok(Err(reason))`
    /// when no copy of it can be published, so it must stay.
    async fn republish(
        &self,
        settler: &Settler,
        delivery: &Delivery,
        options: &ReplayOptions,
    ) -> Result<Result<(), String>, Error> {
        if let Some(set_aside) = SetAside::of(&delivery.properties) {
            return Ok(Err(set_aside.to_string()));
        }
        let original_queue = delivery
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(headers::ORIGINAL_QUEUE))
            .and_then(|v| match header_view(v) {
                HeaderValue::Str(s) => Some(s.to_owned()),
                _ => None,
            });
        let (default_exchange, default_key) =
            replay_target(original_queue.as_deref(), &self.names.queue);
        let exchange = options.to_exchange.clone().unwrap_or(default_exchange);
        let routing_key = options.to_routing_key.clone().unwrap_or(default_key);
        let mut entry = Vec::new();
        if let Some(by) = &options.by {
            entry.push((
                ShortString::from(headers::REPLAYED_BY),
                AMQPValue::LongString(LongString::from(by.as_bytes())),
            ));
        }
        let (properties, body) = match &options.edit {
            Some(edit) => {
                let (properties, body, replaced) = edit.apply(&delivery.properties, &delivery.data);
                entry.extend(replaced);
                (properties, std::borrow::Cow::Owned(body))
            }
            None => (
                delivery.properties.clone(),
                std::borrow::Cow::Borrowed(&delivery.data[..]),
            ),
        };
        let properties = replay_properties_with(&properties, &now_rfc3339(), entry);
        let target = Target {
            exchange: &exchange,
            routing_key: &routing_key,
            queue: &routing_key,
            // The copy goes to a work queue, whose dead-lettering may add x-death.
            headroom: broker_headroom(&routing_key, &exchange, &routing_key),
        };
        let properties = match settler.fit(properties, &target) {
            Ok(properties) => properties,
            Err(too_large) => {
                return Ok(Err(format!(
                    "its copy would need {} bytes of properties and headers, more than the {} \
                     allowed in a frame of {}",
                    too_large.size,
                    too_large.limit,
                    settler.frame_max()
                )));
            }
        };
        // A replay starts a trace of its own, linked to the failure's.
        let span = tracing::info_span!(
            "replay",
            otel.name = %format_args!("{} replay", self.names.dead_letter_queue),
            otel.kind = "producer",
            messaging.system = "rabbitmq",
            messaging.destination.name = %routing_key,
        );
        link_trace(&span, delivery.properties.headers().as_ref());
        settler
            .publish(&target, &body, properties)
            .instrument(span)
            .await
            .map_err(|failure| Error::Publish {
                exchange: exchange.clone(),
                routing_key: routing_key.clone(),
                failure,
            })?;
        Ok(Ok(()))
    }
}

/// Copies an import keeps in flight before it waits for confirmations.
const IMPORT_WINDOW: usize = 500;

/// What [`Dlq::export`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    /// Messages written.
    pub exported: usize,
    /// Matching messages that could not be written, with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedMessage>,
    /// Messages in the dead-letter queue (an export removes none).
    pub kept: usize,
}

/// The properties of a replayed copy: the failure headers move into one new
/// entry of `x-replay-history`, which keeps the newest
/// [`REPLAY_HISTORY_LIMIT`](rabbit_backoff_core::REPLAY_HISTORY_LIMIT) entries;
/// `x-replay-count` counts every replay; `x-retry-count` starts again at 0.
#[cfg(test)]
pub(crate) fn replay_properties(original: &BasicProperties, replayed_at: &str) -> BasicProperties {
    replay_properties_with(original, replayed_at, Vec::new())
}

/// [`replay_properties`] with more fields in the new history entry (who
/// replayed it, what an edit replaced).
pub(crate) fn replay_properties_with(
    original: &BasicProperties,
    replayed_at: &str,
    more: Vec<(ShortString, AMQPValue)>,
) -> BasicProperties {
    let mut table = original.headers().clone().unwrap_or_default();
    let mut entry = FieldTable::default();
    for name in FAILURE_HEADERS {
        if let Some(value) = table.inner().get(name) {
            entry.insert(ShortString::from(name), value.clone());
        }
    }
    entry.insert(
        ShortString::from(REPLAYED_AT),
        AMQPValue::LongString(LongString::from(replayed_at.as_bytes())),
    );
    for (name, value) in more {
        entry.insert(name, value);
    }
    let earlier: &[AMQPValue] = match table.inner().get(REPLAY_HISTORY) {
        Some(AMQPValue::FieldArray(items)) => items.as_slice(),
        _ => &[],
    };
    // Messages replayed before the count existed count their history entries.
    let replays = table
        .inner()
        .get(headers::REPLAY_COUNT)
        .map(|v| read_retry_count(Some(&header_view(v))).count)
        .unwrap_or(earlier.len() as u32)
        .max(earlier.len() as u32)
        .saturating_add(1);
    let mut history: Vec<AMQPValue> = earlier[history_overflow(earlier.len())..].to_vec();
    history.push(AMQPValue::FieldTable(entry));
    let history = FieldArray::from(history);
    let mut kept = FieldTable::default();
    for (name, value) in table.inner() {
        if !FAILURE_HEADERS.contains(&name.as_str()) {
            kept.insert(name.clone(), value.clone());
        }
    }
    table = kept;
    table.insert(
        ShortString::from(REPLAY_HISTORY),
        AMQPValue::FieldArray(history),
    );
    let stripped = original.clone().with_headers(table);
    republish_properties(
        &stripped,
        &[
            (headers::RETRY_COUNT, HeaderValue::Int(0)),
            (REPLAYED_AT, HeaderValue::Str(replayed_at)),
            (headers::REPLAY_COUNT, HeaderValue::Int(replays.into())),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_moves_the_failure_into_the_history() {
        let mut headers = FieldTable::default();
        headers.insert("x-error".into(), AMQPValue::LongString("db down".into()));
        headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(3));
        headers.insert(
            "x-dead-letter-reason".into(),
            AMQPValue::LongString("exhausted".into()),
        );
        headers.insert("tenant".into(), AMQPValue::LongString("acme".into()));
        let original = BasicProperties::default()
            .with_message_id("m".into())
            .with_headers(headers);

        let first = replay_properties(&original, "2026-01-01T00:00:00Z");
        let h = first.headers().as_ref().unwrap().inner();
        assert_eq!(h.get("x-retry-count"), Some(&AMQPValue::LongLongInt(0)));
        assert_eq!(h.get("x-error"), None);
        assert_eq!(h.get("x-dead-letter-reason"), None);
        assert_eq!(h.get("tenant"), Some(&AMQPValue::LongString("acme".into())));
        let Some(AMQPValue::FieldArray(history)) = h.get(REPLAY_HISTORY) else {
            panic!("history")
        };
        assert_eq!(history.as_slice().len(), 1);
        let Some(AMQPValue::FieldTable(entry)) = history.as_slice().first() else {
            panic!("entry")
        };
        assert_eq!(
            entry.inner().get("x-error"),
            Some(&AMQPValue::LongString("db down".into()))
        );
        assert_eq!(first.message_id().as_ref().map(|s| s.as_str()), Some("m"));

        // A second replay appends.
        let second = replay_properties(&first, "2026-01-02T00:00:00Z");
        let Some(AMQPValue::FieldArray(history)) = second
            .headers()
            .as_ref()
            .unwrap()
            .inner()
            .get(REPLAY_HISTORY)
        else {
            panic!("history")
        };
        assert_eq!(history.as_slice().len(), 2);
    }
}
