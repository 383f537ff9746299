//! The dead-letter index of quorum topologies, written by the consumer
//! ([`IndexFeed::Written`](rabbit_backoff_core::IndexFeed::Written)).
//!
//! One writer per runtime, on a connection of its own: the consumers hand it
//! each dead letter once the broker confirmed it in the dead-letter queue,
//! and it publishes a copy to the index's stream in the background. Nothing
//! it does can hold a delivery back:
//! - a consumer hands an entry over without waiting (a bounded queue; when
//!   it is full, the entry is dropped);
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
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use lapin::BasicProperties;
use rabbit_backoff_core::{DeadLetterIndexDecl, DeclareMode};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::transport::{
    Channel, Confirm, Connection, PendingConfirm, Publication, Transport, TransportError,
};

/// How many entries wait for the writer at most; more are dropped.
const QUEUED: usize = 4096;
/// How many entries are published and not yet confirmed at most.
const IN_FLIGHT: usize = 256;
/// How long a confirm, a declaration or a connection is awaited before the
/// writer drops its connection: a stream whose coordinator lost its quorum
/// answers nothing for 30 s.
pub(crate) const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);
/// The pauses between two connections of the writer: from the first to the
/// last, doubling.
const PAUSES: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));
/// How long a stopping writer keeps publishing what it holds.
const FLUSH: Duration = Duration::from_secs(2);

/// What a consumer hands the writer.
enum Command {
    /// An index the consumers of this runtime write to: declared (or with
    /// [`DeclareMode::Passive`] only checked) on every connection of the
    /// writer.
    Declare(DeadLetterIndexDecl, DeclareMode),
    /// A confirmed dead letter, for the stream `stream`.
    Write {
        stream: Arc<str>,
        body: Vec<u8>,
        properties: BasicProperties,
    },
}

/// The handle the consumers write entries through: cheap to clone.
#[derive(Clone)]
pub(crate) struct IndexWriter {
    commands: mpsc::Sender<Command>,
}

impl IndexWriter {
    /// Starts the writer of a runtime reaching its broker through
    /// `transport`; it runs until every handle is dropped, then publishes
    /// what it holds for at most [`FLUSH`].
    pub(crate) fn start(transport: Arc<dyn Transport>) -> (Self, tokio::task::JoinHandle<()>) {
        let (commands, received) = mpsc::channel(QUEUED);
        let task = tokio::spawn(Writer::new(transport).run(received));
        (IndexWriter { commands }, task)
    }

    /// Declares `index` (or with [`DeclareMode::Passive`] checks that its
    /// entries stream exists) on the writer's connection, now and on each of
    /// its reconnections.
    pub(crate) async fn declare(&self, index: DeadLetterIndexDecl, mode: DeclareMode) {
        // Fails only when the writer is gone: then there is nothing to do.
        let _ = self.commands.send(Command::Declare(index, mode)).await;
    }

    /// Hands over a dead letter confirmed in the dead-letter queue, to be
    /// written to `stream`. Never waits: when the writer is behind by
    /// [`QUEUED`] entries, the entry is dropped (and the count check heals
    /// the index).
    pub(crate) fn write(&self, stream: &Arc<str>, body: &[u8], properties: BasicProperties) {
        let entry = Command::Write {
            stream: Arc::clone(stream),
            body: body.to_vec(),
            properties,
        };
        if self.commands.try_send(entry).is_err() {
            tracing::debug!("the dead-letter index {stream} is behind; an entry is dropped");
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

    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let mut pending: FuturesUnordered<PendingConfirm> = FuturesUnordered::new();
        loop {
            tokio::select! {
                biased;
                Some(confirmed) = pending.next(), if !pending.is_empty() => {
                    self.confirmed(confirmed, &mut pending);
                }
                command = commands.recv(), if pending.len() < IN_FLIGHT => match command {
                    Some(Command::Declare(index, mode)) => self.add(index, mode).await,
                    Some(Command::Write { stream, body, properties }) => {
                        if let Some(confirm) = self.publish(&stream, &body, properties).await {
                            pending.push(confirm);
                        }
                    }
                    None => break,
                },
            }
        }
        let flushed = tokio::time::timeout(FLUSH, async {
            while let Some(confirmed) = pending.next().await {
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

    /// Publishes an entry to `stream`, connecting first when the writer has
    /// no connection and may open one. `None` when the entry is dropped.
    async fn publish(
        &mut self,
        stream: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Option<PendingConfirm> {
        if self.session.is_none() && !self.connect().await {
            return self.drop_entry(stream);
        }
        let session = self.session.as_ref()?;
        if !session.streams.contains(stream) {
            return self.drop_entry(stream);
        }
        let sent = tokio::time::timeout(
            CONFIRM_TIMEOUT,
            session
                .channel
                .send(Publication::new("", stream, body, properties)),
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
                    match tokio::time::timeout(CONFIRM_TIMEOUT, confirm).await {
                        Ok(confirmed) => confirmed,
                        Err(_) => Err(TransportError::Other(format!(
                            "no confirm within {CONFIRM_TIMEOUT:?}"
                        ))),
                    }
                }))
            }
            Err(e) => {
                self.failed(&e.to_string()).await;
                self.drop_entry(stream)
            }
        }
    }

    /// What became of a published entry: a connection that failed to
    /// confirm it is dropped (with the entries still in flight on it).
    fn confirmed(
        &mut self,
        confirmed: Result<Confirm, TransportError>,
        pending: &mut FuturesUnordered<PendingConfirm>,
    ) {
        let why = match confirmed {
            Ok(Confirm::Ack) => return,
            Ok(Confirm::Nack) => "an entry was refused".to_owned(),
            Ok(Confirm::Returned) => "an entry found no stream".to_owned(),
            Err(e) => e.to_string(),
        };
        self.dropped += 1 + pending.len() as u64;
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

    fn drop_entry(&mut self, stream: &str) -> Option<PendingConfirm> {
        if self.dropped == 0 {
            tracing::warn!(
                "an entry of the dead-letter index {stream} is dropped; `dlq groups` reads the \
                 dead-letter queue until the index takes entries again"
            );
        }
        self.dropped += 1;
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
