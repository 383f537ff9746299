//! The dead-letter index, written by the consumer on every topology
//! ([`IndexFeed::Written`](rabbit_backoff_core::IndexFeed::Written)), and
//! the fates of replayed copies, written to their replay log (a stream a
//! replay job declares; when none exists, nothing is written).
//!
//! One writer per runtime, on a connection of its own: a consumer makes a
//! dead letter's entry ([`PackedEntry`]) from its properties as it publishes
//! it, hands the entry over once the broker confirmed the dead letter in the
//! dead-letter queue, and the writer publishes it to the index's
//! stream in the background, many entries to a message ([`IndexBatch`]):
//! what has gathered goes out when [`BATCH`] entries wait or the first has
//! waited [`LINGER`], whichever comes first. Nothing it does can hold a
//! delivery back:
//! - a consumer hands an entry over without waiting: it pushes it on a
//!   bounded list under a lock held for the push (when [`QUEUED`] entries
//!   wait, the entry is dropped), and wakes the writer only for the first
//!   entry of a batch and when a batch is full, not for each one;
//! - the streams are declared by the writer, on its connection, not on the
//!   consumer's, so a consumer starts while the stream coordinator is down;
//! - a stream that cannot take entries (a coordinator without its quorum
//!   blocks a publish for 30 s, then the broker closes the connection)
//!   blocks only the writer's connection, which it drops after
//!   [`CONFIRM_TIMEOUT`] and opens again after a pause.
//!
//! An entry dropped on the way leaves the index short of the queue. The
//! readers' count check notices, reads the queue once and leaves a
//! checkpoint, from which the index describes the queue again.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use lapin::BasicProperties;
use lapin::types::ShortString;
use rabbit_backoff_core::{
    DeadLetterIndexDecl, DeclareMode, FateBatch, IndexBatch, PackedEntry, ReplayFate,
};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::transport::amqp_values::PERSISTENT;
use crate::transport::{Channel, Confirm, Connection, Publication, Transport, TransportError};

/// How many entries wait for the writer at most; more are dropped.
const QUEUED: usize = 4096;
/// The most entries in one batch.
pub(crate) const BATCH: usize = 512;
/// How long the first entry of a batch waits for more before the batch goes
/// out. Each stream message costs the broker a write and a confirm and
/// each batch wakes the writer's connection, whatever it holds: at 5 ms a
/// flood of 8,000 dead letters a second went out about 40 to a message, and
/// S2 on 3.10 classic queues ran 1.07–1.13× faster without the index than
/// with it; at 50 ms the batches fill and the two run at par
/// (PERFORMANCE.md). An entry reaches the index 50 ms later at most, which
/// no reader of a summary notices.
pub(crate) const LINGER: Duration = Duration::from_millis(50);
/// How many batches are published and not yet confirmed at most.
const IN_FLIGHT: usize = 16;
/// How long a confirm, a declaration or a connection is awaited before the
/// writer drops its connection: a stream whose coordinator lost its quorum
/// answers nothing for 30 s.
pub(crate) const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);
/// The pauses between two connections of the writer: from the first to the
/// last, doubling.
const PAUSES: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));
/// How long a stopping writer keeps publishing what it holds.
const FLUSH: Duration = Duration::from_secs(2);

/// An index the consumers of this runtime write to: declared (or with
/// [`DeclareMode::Passive`] only checked) on every connection of the
/// writer.
struct Declare(DeadLetterIndexDecl, DeclareMode);

/// A record for the stream `stream`.
struct Written {
    stream: Arc<str>,
    record: Record,
}

/// What the writer is handed.
enum Record {
    /// The index entry of a confirmed dead letter.
    DeadLetter(PackedEntry),
    /// The fate of a replayed copy, for its dead-letter queue's replay log.
    Fate(ReplayFate),
}

/// The batches of one publication round, by stream.
enum Batch {
    Entries(Vec<PackedEntry>),
    Fates(FateBatch),
}

impl Batch {
    fn len(&self) -> usize {
        match self {
            Batch::Entries(entries) => entries.len(),
            Batch::Fates(batch) => batch.fates.len(),
        }
    }
}

/// The dead letters handed over and not yet taken by the writer.
#[derive(Default)]
struct Handed {
    waiting: Mutex<Vec<Written>>,
    /// Wakes the writer: at the first entry of a batch, and when a batch
    /// is full.
    wake: Notify,
}

/// A batch published and not yet confirmed: what became of it, how many
/// records it holds, and whether they are fates (which a replay log that
/// does not exist returns: no replay job listens).
type Sent = Pin<Box<dyn Future<Output = (Result<Confirm, TransportError>, usize, bool)> + Send>>;

/// The handle the consumers write entries through: cheap to clone. The
/// writer stops once every handle is dropped.
#[derive(Clone)]
pub(crate) struct IndexWriter {
    declares: mpsc::Sender<Declare>,
    handed: Arc<Handed>,
}

impl IndexWriter {
    /// Starts the writer of a runtime reaching its broker through
    /// `transport`; it runs until every handle is dropped, then publishes
    /// what it holds for at most [`FLUSH`].
    pub(crate) fn start(transport: Arc<dyn Transport>) -> (Self, tokio::task::JoinHandle<()>) {
        let (declares, received) = mpsc::channel(16);
        let handed = Arc::new(Handed::default());
        let task = tokio::spawn(Writer::new(transport).run(received, Arc::clone(&handed)));
        (IndexWriter { declares, handed }, task)
    }

    /// Declares `index` (or with [`DeclareMode::Passive`] checks that its
    /// entries stream exists) on the writer's connection, now and on each of
    /// its reconnections.
    pub(crate) async fn declare(&self, index: DeadLetterIndexDecl, mode: DeclareMode) {
        // Fails only when the writer is gone: then there is nothing to do.
        let _ = self.declares.send(Declare(index, mode)).await;
    }

    /// Hands over the entry of a dead letter confirmed in the dead-letter
    /// queue, to be written to `stream`. Never waits: when the writer is
    /// behind by [`QUEUED`] entries, the entry is dropped (and the count
    /// check heals the index).
    pub(crate) fn write(&self, stream: &Arc<str>, entry: PackedEntry) {
        self.hand(Written {
            stream: Arc::clone(stream),
            record: Record::DeadLetter(entry),
        });
    }

    /// Hands over the fate of a replayed copy, to be written to the replay
    /// log `stream`; like [`write`](Self::write), never waits. Nothing is
    /// written when the log does not exist (no replay job is watching).
    pub(crate) fn fate(&self, stream: &Arc<str>, fate: ReplayFate) {
        self.hand(Written {
            stream: Arc::clone(stream),
            record: Record::Fate(fate),
        });
    }

    fn hand(&self, written: Written) {
        let stream = Arc::clone(&written.stream);
        let waiting = {
            let mut waiting = self
                .handed
                .waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if waiting.len() >= QUEUED {
                drop(waiting);
                tracing::debug!("the dead-letter index {stream} is behind; an entry is dropped");
                return;
            }
            waiting.push(written);
            waiting.len()
        };
        if waiting == 1 || waiting == BATCH {
            self.handed.wake.notify_one();
        }
    }
}

/// The writer's connection, with its publishing channel and the streams it
/// declared.
struct Session {
    connection: Arc<dyn Connection>,
    channel: Arc<dyn Channel>,
    /// The entries streams that take entries on this connection.
    streams: HashSet<String>,
}

/// The writer's task state.
struct Writer {
    transport: Arc<dyn Transport>,
    indexes: Vec<(DeadLetterIndexDecl, DeclareMode)>,
    session: Option<Session>,
    /// When the next connection may be opened, after a failure.
    not_before: Option<Instant>,
    /// The pause after the next failure.
    pause: Duration,
    /// Entries dropped since the last one written.
    dropped: u64,
}

impl Writer {
    fn new(transport: Arc<dyn Transport>) -> Self {
        Writer {
            transport,
            indexes: Vec::new(),
            session: None,
            not_before: None,
            pause: PAUSES.0,
            dropped: 0,
        }
    }

    async fn run(mut self, mut declares: mpsc::Receiver<Declare>, handed: Arc<Handed>) {
        let mut pending: FuturesUnordered<Sent> = FuturesUnordered::new();
        loop {
            tokio::select! {
                biased;
                Some(confirmed) = pending.next(), if !pending.is_empty() => {
                    self.confirmed(confirmed, &mut pending);
                }
                declare = declares.recv() => match declare {
                    Some(Declare(index, mode)) => self.add(index, mode).await,
                    // Every handle is gone: the runtime is stopping.
                    None => break,
                },
                () = handed.wake.notified(), if pending.len() < IN_FLIGHT => {
                    // The first entry of a batch: let more gather, unless
                    // a batch is full already.
                    if handed.len() < BATCH {
                        tokio::time::sleep(LINGER).await;
                    }
                    self.publish_handed(&handed, &mut pending).await;
                }
            }
        }
        let flushed = tokio::time::timeout(FLUSH, async {
            self.publish_handed(&handed, &mut pending).await;
            while let Some((confirmed, _, _)) = pending.next().await {
                if confirmed.is_err() {
                    break;
                }
            }
        });
        let _ = flushed.await;
        if let Some(session) = self.session.take() {
            session.connection.close().await;
        }
    }

    /// Takes every record handed over and publishes them, [`BATCH`] at most to a message, a batch per stream.
    async fn publish_handed(&mut self, handed: &Handed, pending: &mut FuturesUnordered<Sent>) {
        let written =
            std::mem::take(&mut *handed.waiting.lock().unwrap_or_else(|e| e.into_inner()));
        let mut batches: Vec<(Arc<str>, Batch)> = Vec::new();
        for Written { stream, record } in written {
            let fates = matches!(record, Record::Fate(_));
            let at = match batches.iter().rposition(|(s, b)| {
                *s == stream && matches!(b, Batch::Fates(_)) == fates && b.len() < BATCH
            }) {
                Some(at) => at,
                None => {
                    let batch = if fates {
                        Batch::Fates(FateBatch::default())
                    } else {
                        Batch::Entries(Vec::new())
                    };
                    batches.push((stream, batch));
                    batches.len() - 1
                }
            };
            match (record, &mut batches[at].1) {
                (Record::Fate(fate), Batch::Fates(batch)) => batch.fates.push(fate),
                (Record::DeadLetter(entry), Batch::Entries(entries)) => entries.push(entry),
                _ => unreachable!("a record goes to a batch of its kind"),
            }
        }
        for (stream, batch) in batches {
            if let Some(sent) = self.publish(&stream, batch).await {
                pending.push(sent);
            }
        }
    }

    /// Registers `index`, and declares it on the current connection: at
    /// once, so that the binding an earlier version left is gone before the
    /// first dead letter (a connection that cannot be opened now is opened
    /// at the first entry, and declares every index then).
    async fn add(&mut self, index: DeadLetterIndexDecl, mode: DeclareMode) {
        if self.session.is_none() {
            self.indexes.push((index, mode));
            self.connect().await;
            return;
        }
        if let Some(session) = &mut self.session
            && declared(&*session.connection, &index, mode).await
        {
            session.streams.insert(index.entries.name.clone());
        }
        self.indexes.push((index, mode));
    }

    /// Publishes a batch to `stream`, connecting first when the writer has
    /// no connection and may open one. `None` when its records are dropped.
    async fn publish(&mut self, stream: &str, batch: Batch) -> Option<Sent> {
        let entries = batch.len();
        if entries == 0 {
            return None;
        }
        if self.session.is_none() && !self.connect().await {
            return self.drop_entries(stream, entries);
        }
        let session = self.session.as_ref()?;
        let fates = matches!(batch, Batch::Fates(_));
        // A replay log is declared by its replay job, not by the writer.
        if !fates && !session.streams.contains(stream) {
            return self.drop_entries(stream, entries);
        }
        let (content_type, body) = match batch {
            Batch::Entries(entries) => (
                IndexBatch::CONTENT_TYPE,
                PackedEntry::encode_batch(&entries),
            ),
            Batch::Fates(batch) => (
                FateBatch::CONTENT_TYPE,
                serde_json::to_vec(&batch).expect("fates serialize"),
            ),
        };
        let properties = BasicProperties::default()
            .with_content_type(ShortString::from(content_type))
            .with_delivery_mode(PERSISTENT);
        let sent = tokio::time::timeout(
            CONFIRM_TIMEOUT,
            session
                .channel
                .send(Publication::new("", stream, &body, properties)),
        )
        .await
        .unwrap_or_else(|_| {
            Err(TransportError::Other(format!(
                "not sent within {CONFIRM_TIMEOUT:?}"
            )))
        });
        match sent {
            Ok(confirm) => {
                if self.dropped > 0 {
                    tracing::info!(
                        "the dead-letter index {stream} takes entries again, after {} dropped; \
                         the next `dlq groups` reads the queue once and leaves a checkpoint",
                        self.dropped
                    );
                    self.dropped = 0;
                }
                Some(Box::pin(async move {
                    let confirmed = match tokio::time::timeout(CONFIRM_TIMEOUT, confirm).await {
                        Ok(confirmed) => confirmed,
                        Err(_) => Err(TransportError::Other(format!(
                            "no confirm within {CONFIRM_TIMEOUT:?}"
                        ))),
                    };
                    (confirmed, entries, fates)
                }))
            }
            Err(e) => {
                self.failed(&e.to_string()).await;
                self.drop_entries(stream, entries)
            }
        }
    }

    /// What became of a published batch: a connection that failed to
    /// confirm it is dropped (with the batches still in flight on it).
    fn confirmed(
        &mut self,
        (confirmed, entries, fates): (Result<Confirm, TransportError>, usize, bool),
        pending: &mut FuturesUnordered<Sent>,
    ) {
        let why = match confirmed {
            Ok(Confirm::Ack) => return,
            // No replay log: no job watches these copies any more.
            Ok(Confirm::Returned) if fates => return,
            Ok(Confirm::Nack) => "a batch of entries was refused".to_owned(),
            Ok(Confirm::Returned) => "a batch of entries found no stream".to_owned(),
            Err(e) => e.to_string(),
        };
        // The batches in flight go with the connection: each counts as at
        // least one entry dropped (the count is for the log only).
        self.dropped += (entries + pending.len()) as u64;
        pending.clear();
        if let Some(session) = self.session.take() {
            tracing::warn!(
                "the dead-letter index writer leaves its connection ({why}); the index is behind \
                 the dead-letter queue until it writes again"
            );
            tokio::spawn(async move { session.connection.close().await });
            self.back_off();
        }
    }

    /// Opens a connection and declares every index on it, unless the pause
    /// after a failure is not over. True when connected.
    async fn connect(&mut self) -> bool {
        if self.not_before.is_some_and(|at| Instant::now() < at) {
            return false;
        }
        let opened = tokio::time::timeout(CONFIRM_TIMEOUT, async {
            let connection = self.transport.connect().await?;
            let channel = connection.open_channel().await?;
            Ok::<_, TransportError>((connection, channel))
        })
        .await;
        let (connection, channel) = match opened {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) => {
                self.failed(&e.to_string()).await;
                return false;
            }
            Err(_) => {
                self.failed("no connection within the timeout").await;
                return false;
            }
        };
        let mut streams = HashSet::new();
        for (index, mode) in &self.indexes {
            if declared(&*connection, index, *mode).await {
                streams.insert(index.entries.name.clone());
            }
        }
        self.session = Some(Session {
            connection,
            channel,
            streams,
        });
        self.not_before = None;
        self.pause = PAUSES.0;
        true
    }

    /// A connection failed: the next one waits for the pause.
    async fn failed(&mut self, why: &str) {
        if let Some(session) = self.session.take() {
            session.connection.close().await;
        }
        tracing::warn!(
            "the dead-letter index writer has no connection ({why}); it tries again in {:?}",
            self.pause
        );
        self.back_off();
    }

    fn back_off(&mut self) {
        self.not_before = Some(Instant::now() + self.pause);
        self.pause = (self.pause * 2).min(PAUSES.1);
    }

    fn drop_entries(&mut self, stream: &str, entries: usize) -> Option<Sent> {
        if self.dropped == 0 {
            tracing::warn!(
                "entries of the dead-letter index {stream} are dropped; `dlq groups` reads the \
                 dead-letter queue until the index takes entries again"
            );
        }
        self.dropped += entries as u64;
        None
    }
}

/// Declares `index` through `connection` ([`declare`]); whether it was, and
/// when not, says why and what `dlq groups` does meanwhile.
async fn declared(
    connection: &dyn Connection,
    index: &DeadLetterIndexDecl,
    mode: DeclareMode,
) -> bool {
    match declare(connection, index, mode).await {
        Ok(()) => true,
        Err(e) => {
            tracing::info!(
                "the dead-letter index {} is not declared ({e}); `dlq groups` reads the \
                 dead-letter queue until it is",
                index.entries.name
            );
            false
        }
    }
}

/// Declares `index`'s two streams and removes the binding an earlier
/// version gave its entries (the broker then no longer routes dead letters
/// to it), within [`CONFIRM_TIMEOUT`], on a channel of its own. With
/// [`DeclareMode::Passive`], only checks that the entries stream exists.
async fn declare(
    connection: &dyn Connection,
    index: &DeadLetterIndexDecl,
    mode: DeclareMode,
) -> Result<(), String> {
    let declared = tokio::time::timeout(CONFIRM_TIMEOUT, async {
        let channel = connection.open_channel().await.map_err(|e| e.to_string())?;
        let result = async {
            if mode == DeclareMode::Passive {
                return channel
                    .check_queue(&index.entries.name)
                    .await
                    .map(drop)
                    .map_err(|e| format!("{}: {e}", index.entries.name));
            }
            for stream in index.queues() {
                channel
                    .declare_queue(stream)
                    .await
                    .map_err(|e| format!("{}: {e}", stream.name))?;
            }
            let binding = &index.binding;
            channel
                .unbind_queue(binding)
                .await
                .map_err(|e| format!("unbinding {} from {}: {e}", binding.queue, binding.exchange))
        }
        .await;
        channel.close().await;
        result
    })
    .await;
    declared.unwrap_or_else(|_| Err(format!("no answer within {CONFIRM_TIMEOUT:?}")))
}

impl Handed {
    /// How many dead letters wait.
    fn len(&self) -> usize {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
