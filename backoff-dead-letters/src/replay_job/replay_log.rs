//! The replay log of a dead-letter queue (`<dead-letter queue>.replays`, a
//! stream): the jobs' records, written here, and the fates of their
//! copies, written by the consumers; read whole for a status, or followed
//! by a job's driver.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use lapin::BasicProperties;
use lapin::types::ShortString;
use rabbit_backoff_core::{TopologyNames, replay_log_decl};
use tokio::sync::watch;

use super::job_book::JobBook;
use super::replay_record::{RECORD_CONTENT_TYPE, ReplayRecord};
use crate::index::index_stream::{mark_end, marker_of, read_to_marker};
use crate::run_id::run_id;
use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{PERSISTENT, channel_error, confirm_channel};
use rabbit_backoff_runtime::transport::{
    Channel, Confirm, Connection, NOT_FOUND, Publication, StreamOffset, TransportError,
};

/// Deliveries the follower of a replay log holds unacknowledged at most.
const PREFETCH: u16 = 1000;

/// Deliveries the follower acknowledges together, well within the
/// prefetch, so that the broker never stops sending.
const ACK_EVERY: u16 = 50;

/// A replay log's failure, as the runtime's error for the stream.
fn log_error(stream: &str, action: &'static str, reason: impl ToString) -> Error {
    Error::Channel {
        action,
        queue: stream.to_owned(),
        source: TransportError::Other(reason.to_string()),
    }
}

/// Declares the replay log of `names`' dead-letter queue.
pub(crate) async fn declare(
    connection: &dyn Connection,
    names: &TopologyNames,
) -> Result<(), Error> {
    let decl = replay_log_decl(names);
    let channel = confirm_channel(connection, &decl.name).await?;
    let declared = channel
        .declare_queue(&decl)
        .await
        .map(drop)
        .map_err(channel_error(&decl.name, "declaring the replay log"));
    channel.close().await;
    declared
}

/// Appends `record` to the replay log `stream`, confirmed.
pub(crate) async fn append(
    channel: &dyn Channel,
    stream: &str,
    record: &ReplayRecord,
) -> Result<(), Error> {
    let body = serde_json::to_vec(record).expect("a replay record serializes");
    let properties = BasicProperties::default()
        .with_content_type(ShortString::from(RECORD_CONTENT_TYPE))
        .with_delivery_mode(PERSISTENT);
    let confirm = channel
        .publish(Publication::new("", stream, &body, properties))
        .await
        .map_err(channel_error(stream, "writing to the replay log"))?;
    match confirm {
        Confirm::Ack => Ok(()),
        other => Err(log_error(
            stream,
            "writing to the replay log",
            format!("the broker did not take the record ({other:?})"),
        )),
    }
}

/// Every job of the replay log `stream`, read up to its end; `None` when
/// there is no log (no job was ever started on the queue).
pub(crate) async fn read_book(
    connection: &dyn Connection,
    stream: &str,
) -> Result<Option<JobBook>, Error> {
    let channel = confirm_channel(connection, stream).await?;
    let result = async {
        match channel.check_queue(stream).await {
            Err(e) if e.code() == Some(NOT_FOUND) => return Ok(None),
            Err(e) => return Err(channel_error(stream, "finding the replay log")(e)),
            Ok(_) => {}
        }
        let id = run_id();
        mark_end(&*channel, stream, &id)
            .await
            .map_err(|e| log_error(stream, "marking the end of the replay log", e))?;
        let mut book = JobBook::default();
        read_to_marker(&*channel, stream, None, &id, |delivery| {
            book.take(&delivery.properties, &delivery.data);
        })
        .await
        .map_err(|e| log_error(stream, "reading the replay log", e))?;
        Ok(Some(book))
    }
    .await;
    channel.close().await;
    result
}

/// A replay log followed from its first message as it grows, folded into
/// a [`JobBook`] that a job's driver reads.
pub(crate) struct LogFollower {
    pub(crate) book: Arc<Mutex<JobBook>>,
    /// Whether the follower has read what the log held when it started;
    /// an error once it cannot read on.
    caught_up: watch::Receiver<Result<bool, String>>,
    task: tokio::task::JoinHandle<()>,
    channel: Arc<dyn Channel>,
}

impl LogFollower {
    /// Follows `stream` on a channel of `connection`.
    pub(crate) async fn start(
        connection: &dyn Connection,
        stream: &str,
    ) -> Result<LogFollower, Error> {
        let channel = confirm_channel(connection, stream).await?;
        channel.qos(PREFETCH).await.map_err(channel_error(
            stream,
            "setting the prefetch of the replay log",
        ))?;
        let mut deliveries = channel
            .consume_stream(stream, StreamOffset::First)
            .await
            .map_err(channel_error(stream, "following the replay log"))?;
        let id = run_id();
        mark_end(&*channel, stream, &id)
            .await
            .map_err(|e| log_error(stream, "marking the end of the replay log", e))?;
        let book = Arc::new(Mutex::new(JobBook::default()));
        let (tell, caught_up) = watch::channel(Ok(false));
        let folded = Arc::clone(&book);
        let task = tokio::spawn(async move {
            let mut unacked = 0u16;
            while let Some(delivery) = deliveries.stream.next().await {
                let delivery = match delivery {
                    Ok(delivery) => delivery,
                    Err(e) => {
                        let _ = tell.send(Err(e.to_string()));
                        return;
                    }
                };
                if marker_of(&delivery.properties) == Some(id.as_bytes()) {
                    let _ = tell.send(Ok(true));
                } else {
                    folded
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take(&delivery.properties, &delivery.data);
                }
                unacked += 1;
                // For a stream, an ack only lets the broker send more.
                if unacked >= ACK_EVERY {
                    let _ = delivery.acker.ack_multiple().await;
                    unacked = 0;
                }
            }
            let _ = tell.send(Err("the broker cancelled the follower".to_owned()));
        });
        Ok(LogFollower {
            book,
            caught_up,
            task,
            channel,
        })
    }

    /// Waits until the follower has read what the log held when it
    /// started (at most `within`).
    pub(crate) async fn caught_up(&mut self, stream: &str, within: Duration) -> Result<(), Error> {
        let waited = tokio::time::timeout(within, async {
            loop {
                match &*self.caught_up.borrow_and_update() {
                    Ok(true) => return Ok(()),
                    Ok(false) => {}
                    Err(e) => return Err(e.clone()),
                }
                if self.caught_up.changed().await.is_err() {
                    return Err("the follower stopped".to_owned());
                }
            }
        })
        .await;
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(log_error(stream, "following the replay log", e)),
            Err(_) => Err(log_error(
                stream,
                "following the replay log",
                format!("it was not read to its end within {within:?}"),
            )),
        }
    }

    /// Why the follower can read no more, if it cannot.
    pub(crate) fn failure(&self) -> Option<String> {
        self.caught_up.borrow().as_ref().err().cloned()
    }

    /// Stops following.
    pub(crate) async fn stop(self) {
        self.task.abort();
        self.channel.close().await;
    }
}
