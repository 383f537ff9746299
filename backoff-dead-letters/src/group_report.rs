//! The groups of a dead-letter queue, and where they were read from:
//! the index when it is in step, else a pass that leaves it a checkpoint;
//! and the rebuild of the index.

use crate::dlq::Dlq;
use crate::passes::scan::{Mode, Sink};

use serde::Serialize;

use crate::filter::DeadLetterFilter;
use crate::group::{DeadLetterGroup, GroupTally};
use crate::index::checkpoint::CheckpointWriter;
use crate::index::checkpoint_note::CheckpointNote;
use crate::index::index::{IndexRead, index_exists, index_groups};
use crate::index::index_fallback::IndexFallback;
use crate::index::index_protocol::IndexProtocol;
use crate::message::DeadLetterMessage;

use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::transport::Delivery;
use rabbit_backoff_runtime::transport::{AmqpTransport, Connection, Transport};

/// What [`Dlq::group_report`](crate::Dlq::group_report) read.
///
/// ```
/// use rabbit_backoff::dead_letters::GroupSource;
///
/// assert_eq!(serde_json::to_string(&GroupSource::Index)?, "\"index\"");
/// assert_eq!(GroupSource::Pass.as_str(), "pass");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum GroupSource {
    /// The dead-letter index: its streams, without touching the queue.
    Index,
    /// A pass over the dead-letter queue.
    Pass,
}

impl GroupSource {
    /// `index` or `pass`.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupSource::Index => "index",
            GroupSource::Pass => "pass",
        }
    }
}

/// The groups of a dead-letter queue, with where they were read from.
///
/// ```no_run
/// # async fn demo(dlq: rabbit_backoff::dead_letters::Dlq) -> Result<(), rabbit_backoff::Error> {
/// use rabbit_backoff::dead_letters::{DeadLetterFilter, GroupSource};
///
/// let report = dlq.group_report(&DeadLetterFilter::default()).await?;
/// if let Some(why) = &report.fallback {
///     println!("read the queue: {why}");
/// }
/// assert_eq!(report.source == GroupSource::Pass, report.fallback.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct GroupReport {
    /// The groups, largest first.
    pub groups: Vec<DeadLetterGroup>,
    /// Where they were read from.
    pub source: GroupSource,
    /// Why the index was not read (`None` when it was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<IndexFallback>,
    /// The index's checkpoint: the one an index read started from, or the
    /// one a pass left because the index was out of step (or why it could
    /// not); `None` when none was involved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointNote>,
    /// How the index's entries were read (not serialized).
    #[serde(skip)]
    protocol: Option<IndexProtocol>,
}

impl GroupReport {
    /// A report of `groups` read from `source`, with no fallback and no
    /// checkpoint (what a test double of [`Dlq::group_report`] answers).
    pub fn new(groups: Vec<DeadLetterGroup>, source: GroupSource) -> Self {
        GroupReport {
            groups,
            source,
            fallback: None,
            checkpoint: None,
            protocol: None,
        }
    }

    /// How the index's entries were read, when they were: over the stream
    /// protocol, or over AMQP (for some or all of them); `None` for a pass,
    /// or an index read that had no entries to read (all of them in its
    /// checkpoint).
    pub fn index_protocol(&self) -> Option<IndexProtocol> {
        self.protocol
    }

    /// The report of a read of the index.
    fn of_index(read: IndexRead) -> GroupReport {
        GroupReport {
            groups: read.groups,
            source: GroupSource::Index,
            fallback: None,
            checkpoint: read
                .checkpoint
                .map(|offset| CheckpointNote::ReadFrom { offset }),
            protocol: read.protocol,
        }
    }

    /// The report, saying why the index was not read.
    pub fn with_fallback(mut self, fallback: IndexFallback) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// The report, with what happened to the index's checkpoint.
    pub fn with_checkpoint(mut self, checkpoint: CheckpointNote) -> Self {
        self.checkpoint = Some(checkpoint);
        self
    }

    /// Where the groups were read from and why, in a few words.
    ///
    /// ```
    /// use rabbit_backoff::dead_letters::{CheckpointNote, GroupReport, GroupSource, IndexFallback};
    ///
    /// let report = GroupReport::new(Vec::new(), GroupSource::Pass)
    ///     .with_fallback(IndexFallback::CountMismatch { indexed: 40, depth: 10 })
    ///     .with_checkpoint(CheckpointNote::Written { offset: 52 });
    /// assert_eq!(
    ///     report.reason(),
    ///     "index out of step: 40 live entries, 10 messages; \
    ///      checkpoint written at offset 52 of the index: the next read is from the index"
    /// );
    /// ```
    pub fn reason(&self) -> String {
        let why = match (self.source, &self.fallback) {
            (GroupSource::Index, _) | (GroupSource::Pass, None) => "from the index".to_owned(),
            (GroupSource::Pass, Some(IndexFallback::CountMismatch { indexed, depth })) => {
                format!("index out of step: {indexed} live entries, {depth} messages")
            }
            (GroupSource::Pass, Some(IndexFallback::Absent)) => "no index".to_owned(),
            (GroupSource::Pass, Some(why)) => why.to_string(),
        };
        match &self.checkpoint {
            Some(note) => format!("{why}; {note}"),
            None => why,
        }
    }
}

/// How long a read of the index through another node waits for its
/// connection.
const ELSEWHERE_CONNECT: Duration = Duration::from_secs(10);

impl Dlq {
    /// Reads the index through each other node given to
    /// [`connect`](Self::connect) in turn, after it could not be read
    /// through the node of the connection (`reason`): AMQP 0-9-1 reads a
    /// stream from the replica on the node it is connected to, and a
    /// replica can stay stopped for minutes after its leader's node
    /// restarted while the others run. The first read that is not
    /// [`IndexFallback::Unreadable`], else the first reason; with the
    /// connection of a read that found the index out of step, through which
    /// the pass writes its checkpoint.
    async fn index_groups_elsewhere(
        &self,
        filter: &DeadLetterFilter,
        reason: String,
    ) -> (
        Result<IndexRead, IndexFallback>,
        Option<Arc<dyn Connection>>,
    ) {
        let stream = self.stream_endpoint();
        for uri in &self.other_nodes {
            let transport = AmqpTransport::new(uri.as_str());
            let node = transport.describe();
            let unreadable = |why: &dyn std::fmt::Display| {
                tracing::info!(
                    "{}: the dead-letter index could not be read through {node} either: {why}",
                    self.names.dead_letter_queue
                );
            };
            let connection =
                match tokio::time::timeout(ELSEWHERE_CONNECT, transport.connect()).await {
                    Ok(Ok(connection)) => connection,
                    Ok(Err(e)) => {
                        unreadable(&e);
                        continue;
                    }
                    Err(_) => {
                        unreadable(&format_args!("no connection within {ELSEWHERE_CONNECT:?}"));
                        continue;
                    }
                };
            let read = index_groups(
                &*connection,
                &self.names,
                filter,
                self.index_readers,
                stream.as_ref(),
            )
            .await;
            match read {
                Err(IndexFallback::Unreadable { reason: there }) => {
                    unreadable(&there);
                    connection.close().await;
                }
                Ok(read) => {
                    tracing::info!(
                        "{}: the dead-letter index was read through {node} ({reason})",
                        self.names.dead_letter_queue
                    );
                    connection.close().await;
                    return (Ok(read), None);
                }
                Err(why) => return (Err(why), Some(connection)),
            }
        }
        (Err(IndexFallback::Unreadable { reason }), None)
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
        // A connection to another node, where the index could be read when
        // it could not through this one: the checkpoint is written there.
        let mut elsewhere: Option<Arc<dyn Connection>> = None;
        let fallback = if self.use_index {
            let stream = self.stream_endpoint();
            match index_groups(
                &*self.connection,
                &self.names,
                filter,
                self.index_readers,
                stream.as_ref(),
            )
            .await
            {
                Ok(read) => return Ok(GroupReport::of_index(read)),
                Err(IndexFallback::Unreadable { reason }) => {
                    match self.index_groups_elsewhere(filter, reason).await {
                        (Ok(read), _) => return Ok(GroupReport::of_index(read)),
                        (Err(why), there) => {
                            elsewhere = there;
                            why
                        }
                    }
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
        let index_connection = elsewhere.as_ref().unwrap_or(&self.connection);
        let report = self
            .pass_report(filter, fallback, heal, &**index_connection)
            .await;
        if let Some(connection) = elsewhere {
            connection.close().await;
        }
        report
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
    /// # async fn demo(dlq: rabbit_backoff::dead_letters::Dlq) -> Result<(), rabbit_backoff::Error> {
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
                protocol: None,
            });
        }
        tracing::info!(
            "{}: rebuilding the dead-letter index with a pass over the queue",
            self.names.dead_letter_queue
        );
        self.pass_report(
            &DeadLetterFilter::default(),
            IndexFallback::Rebuild,
            true,
            &*self.connection,
        )
        .await
    }

    /// The groups of what matches `filter`, read with a pass, which leaves
    /// a checkpoint of the index through `index_connection` when
    /// `checkpoint_it` (then the pass reads every message, and the filter
    /// picks the groups).
    pub(super) async fn pass_report(
        &self,
        filter: &DeadLetterFilter,
        fallback: IndexFallback,
        checkpoint_it: bool,
        index_connection: &dyn Connection,
    ) -> Result<GroupReport, Error> {
        let mut writer = None;
        let mut checkpoint = None;
        if checkpoint_it {
            match CheckpointWriter::begin(index_connection, &self.names).await {
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
            checkpoint = Some(match writer.finish(index_connection).await {
                Ok(offset) => CheckpointNote::Written { offset },
                Err(e) => self.not_written(&e),
            });
        }
        Ok(GroupReport {
            groups: tally.into_groups(),
            source: GroupSource::Pass,
            fallback: Some(fallback),
            checkpoint,
            protocol: None,
        })
    }

    /// The note of a checkpoint that could not be written, logged.
    pub(super) fn not_written(&self, e: &Error) -> CheckpointNote {
        tracing::warn!(
            "{}: no checkpoint of the dead-letter index ({e}); `dlq groups` reads the queue \
             until one is written",
            self.names.dead_letter_queue
        );
        CheckpointNote::NotWritten {
            reason: e.to_string(),
        }
    }
}
