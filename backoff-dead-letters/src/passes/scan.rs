//! The pass of every operation on a dead-letter queue: each message
//! matched, then peeked, visited, discarded or replayed, or kept at its
//! place; and what a pass leaves behind (the tombstones of what it removed,
//! a classic queue's messages ready again).

use std::sync::Arc;
use std::time::Duration;

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::toolkit::{CopyPublisher, inspect_queue};
use rabbit_backoff_runtime::transport::Delivery;

use super::pass::Pass;
use super::replay_gate::{Admit, ReplayGate};
use super::replay_options::ReplayOptions;
use super::report::{DeadLetterReport, SkippedMessage};
use crate::dlq::Dlq;
use crate::filter::DeadLetterFilter;
use crate::index::entry_writer::EntryWriter;
use crate::index::tombstones::Tombstones;
use crate::key::key_of;
use crate::message::DeadLetterMessage;
use rabbit_backoff_core::IndexEntry;

/// What a pass does with each matching message.
pub(crate) enum Mode<'a> {
    Peek,
    Replay(&'a ReplayOptions),
    Discard,
}

/// What a scan does with each matching message besides its mode: keep its
/// summary for the report, or hand it to a caller that aggregates or writes
/// it out (in constant memory).
pub(crate) enum Sink<'a> {
    Collect,
    Visit(&'a mut (dyn FnMut(&Delivery, &DeadLetterMessage) -> Result<(), Error> + Send)),
}

impl Dlq {
    /// The messages that match, without removing any or changing their order
    /// (their `redelivered` flag is set by the broker).
    pub async fn peek(&self, filter: &DeadLetterFilter) -> Result<DeadLetterReport, Error> {
        self.scan(filter, Mode::Peek, Sink::Collect).await
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

    /// One pass over the queue (see [`Pass`]): applies `mode` to the
    /// matching messages and keeps every other one at its place.
    pub(crate) async fn scan(
        &self,
        filter: &DeadLetterFilter,
        mode: Mode<'_>,
        sink: Sink<'_>,
    ) -> Result<DeadLetterReport, Error> {
        self.scan_gated(filter, mode, sink, None).await
    }

    /// [`scan`](Self::scan), a replay watched by `gate`.
    pub(crate) async fn scan_gated(
        &self,
        filter: &DeadLetterFilter,
        mode: Mode<'_>,
        mut sink: Sink<'_>,
        mut gate: Option<&mut dyn ReplayGate>,
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
        let mut entries = Vec::new();
        let outcome = self
            .apply(
                &mut pass,
                settler.as_ref(),
                (filter, &mode),
                &mut sink,
                (&mut tombstones, &mut entries),
                &mut gate,
            )
            .await;
        if let Some(settler) = settler {
            settler.close().await;
        }
        // The copies confirmed and not yet recorded, recorded.
        let flushed = match gate {
            Some(gate) => gate.flush().await,
            None => Ok(()),
        };
        let outcome = outcome.and_then(|outcome| flushed.map(|()| outcome));
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
                self.write_entries(entries).await;
                return Err(e);
            }
        };
        let total = pass.total();
        let finished = pass.finish().await;
        self.write_tombstones(tombstones).await;
        self.write_entries(entries).await;
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
    /// nothing. What it changes in the index: the tombstones of what it
    /// removed, and the entries of copies it replayed into the queue.
    pub(crate) async fn apply(
        &self,
        pass: &mut Pass,
        settler: Option<&CopyPublisher>,
        (filter, mode): (&DeadLetterFilter, &Mode<'_>),
        sink: &mut Sink<'_>,
        (tombstones, entries): (&mut Tombstones, &mut Vec<IndexEntry>),
        gate: &mut Option<&mut dyn ReplayGate>,
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
        // A watched replay that said stop: every other message stays.
        let mut stopped = false;
        loop {
            let limit_reached = stopped || filter.limit.is_some_and(|limit| count >= limit);
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
                    let key = key_of(&delivery.properties);
                    let seq = match gate.as_deref_mut() {
                        None => None,
                        Some(gate) => match gate.admit(key, &delivery.properties).await? {
                            Admit::Send(seq) => Some(seq),
                            Admit::Remove => {
                                count -= 1;
                                tombstones.add(&delivery.properties, &summary.group);
                                pass.remove(delivery).await?;
                                removed += 1;
                                continue;
                            }
                            other => {
                                stopped |= matches!(other, Admit::Stop);
                                count -= 1;
                                pass.keep(delivery).await?;
                                continue;
                            }
                        },
                    };
                    let settler = settler.expect("a replay has a settler");
                    let marker = seq.zip(gate.as_deref().map(ReplayGate::job));
                    let published = self
                        .republish(
                            settler,
                            &delivery,
                            options,
                            marker.map(|(seq, job)| (job, seq)),
                        )
                        .await?;
                    match published {
                        Ok(entry) => {
                            entries.extend(entry);
                            if let Some(gate) = gate.as_deref_mut() {
                                gate.confirmed(key).await?;
                            }
                        }
                        Err(reason) => {
                            if let (Some(seq), Some(gate)) = (seq, gate.as_deref_mut()) {
                                gate.withdrawn(key, seq).await?;
                            }
                            tracing::warn!("{queue}: message {} stays: {reason}", position - 1);
                            skipped.push(SkippedMessage {
                                message: summary,
                                reason,
                            });
                            count -= 1;
                            pass.keep(delivery).await?;
                            continue;
                        }
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
    pub(crate) async fn write_tombstones(&self, tombstones: Tombstones) {
        if let Err(e) = tombstones.write(&*self.connection).await {
            tracing::warn!(
                "{}: the dead-letter index's tombstones were not written ({e}); `dlq groups` \
                 reads the queue until the index counts it again",
                self.names.dead_letter_queue
            );
        }
    }

    /// Writes the entries of the copies a replay put back in the queue; a
    /// failure is logged (the index then counts fewer dead letters than the
    /// queue holds, and reading it falls back to a pass).
    pub(crate) async fn write_entries(&self, entries: Vec<IndexEntry>) {
        if entries.is_empty() {
            return;
        }
        let written = EntryWriter::write_all(&*self.connection, &self.names, entries).await;
        if let Err(e) = written {
            tracing::warn!(
                "{}: the dead-letter index's entries of the replayed copies were not written \
                 ({e}); `dlq groups` reads the queue until the index counts it again",
                self.names.dead_letter_queue
            );
        }
    }

    /// A classic queue takes returned messages back as the channel closes;
    /// wait (up to 10 s) until they are ready again, so that the next
    /// operation sees them.
    pub(crate) async fn wait_until_returned(&self, queue: &str, kept: usize) -> Result<(), Error> {
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
