//! The metadata watch: whether the node a connection is on still reaches
//! its cluster's majority, and leaving it when it does not.
//!
//! On RabbitMQ 4.x (metadata in Khepri) a node cut off from the majority
//! keeps its clients' connections and heartbeats, so nothing else tells the
//! runtime that its queues' leaders are on the other side. A metadata write
//! does: it gets no answer there for as long as the cut lasts (see
//! `docs/cluster.md`, "The consumer's node cut off from the cluster").

use std::future::Future;
use std::sync::Arc;

use rabbit_backoff_core::{MetadataProbe, MetadataWatch, MissCounter, WatchVerdict};

use crate::transport::{Channel, Connection};

/// Probes `connection`'s node with [`Channel::probe_metadata`] on a channel
/// of its own, as `watch` says, until `stopped` resolves or the connection
/// is lost. When [`misses`](MetadataWatch::misses) probes in a row get no
/// answer within the [`timeout`](MetadataWatch::timeout), asks the other
/// nodes ([`Connection::majority_elsewhere`]); when one answers, leaves the
/// node ([`Connection::leave`]), which declares the connection lost, and
/// returns. A refused probe (an error, a closed channel) is an answer: the
/// next probe opens a new channel.
pub(crate) async fn watch_metadata(
    connection: Arc<dyn Connection>,
    watch: MetadataWatch,
    stopped: impl Future<Output = ()>,
) {
    let lost = connection.lost();
    let mut stopped = std::pin::pin!(stopped);
    let mut counter = MissCounter::new(&watch);
    let mut channel: Option<Arc<dyn Channel>> = None;
    let mut pause = true;
    loop {
        let round = async {
            if pause {
                tokio::time::sleep(watch.interval).await;
            }
            probe(&*connection, &mut channel, watch).await
        };
        let outcome = tokio::select! {
            _ = stopped.as_mut() => return,
            _ = lost.wait() => return,
            outcome = round => outcome,
        };
        let mut verdict = counter.observe(outcome);
        let mut elsewhere = None;
        if verdict == WatchVerdict::AskElsewhere {
            // This node again, at the same time and given a little longer:
            // when the cluster was electing its metadata store's leader,
            // every node answers again together.
            let again = MetadataWatch::new(
                watch.interval,
                watch.timeout + MetadataWatch::GRACE,
                watch.misses,
            );
            let (other, this_node) = tokio::select! {
                _ = stopped.as_mut() => return,
                _ = lost.wait() => return,
                both = futures_util::future::join(
                    connection.majority_elsewhere(watch.timeout),
                    probe(&*connection, &mut channel, again),
                ) => both,
            };
            elsewhere = other;
            verdict = counter.elsewhere(elsewhere.is_some(), this_node);
            if elsewhere.is_none() && this_node == MetadataProbe::NoAnswer {
                tracing::debug!(
                    "{} does not answer a queue declaration, nor does any other node: \
                     the cluster cannot write; staying",
                    connection.node()
                );
            }
        }
        match verdict {
            WatchVerdict::Wait => pause = true,
            WatchVerdict::ProbeAgain | WatchVerdict::AskElsewhere => pause = false,
            WatchVerdict::Leave => {
                let node = connection.node();
                let other = elsewhere.unwrap_or_default();
                let why = format!(
                    "{node} cannot reach its cluster's majority: a queue declaration got no \
                     answer in {:?}, {} times in a row, while {other} answered one",
                    watch.timeout,
                    counter.missed()
                );
                tracing::warn!("{why}; reconnecting to {other}");
                connection.leave(&why).await;
                return;
            }
            // Not reached with the core pinned exactly; `WatchVerdict` is
            // `#[non_exhaustive]`: wait, as after an answer.
            _ => pause = true,
        }
    }
}

/// One probe, on `channel` (opened first when there is none); a channel
/// whose probe got no answer or was refused is dropped, so that the next
/// probe does not queue behind it.
async fn probe(
    connection: &dyn Connection,
    channel: &mut Option<Arc<dyn Channel>>,
    watch: MetadataWatch,
) -> MetadataProbe {
    let answered = tokio::time::timeout(watch.timeout, async {
        let open = match channel {
            Some(open) => Arc::clone(open),
            None => {
                let open = connection.open_channel().await?;
                *channel = Some(Arc::clone(&open));
                open
            }
        };
        open.probe_metadata().await
    })
    .await;
    match answered {
        Ok(Ok(())) => MetadataProbe::Answered,
        Ok(Err(e)) => {
            tracing::debug!("the metadata probe was refused: {e}");
            *channel = None;
            MetadataProbe::Refused
        }
        Err(_) => {
            tracing::debug!(
                "the metadata probe of {} got no answer in {:?}",
                connection.node(),
                watch.timeout
            );
            *channel = None;
            MetadataProbe::NoAnswer
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use futures_util::future::BoxFuture;
    use rabbit_backoff_core::{ExchangeKind, QueueDecl};

    use super::*;
    use crate::transport::{
        Confirm, Deliveries, Delivery, Lost, LostSignal, Publication, QueueInfo, TransportError,
    };

    /// How the fake node answers a probe.
    #[derive(Clone, Copy, PartialEq)]
    enum Node {
        Healthy,
        Cut,
        Refusing,
    }

    struct FakeConnection {
        node: Mutex<Node>,
        probes: AtomicU32,
        channels: AtomicU32,
        lost: LostSignal,
        left: Mutex<Option<String>>,
        /// What the other nodes say: the one that answers, if any.
        elsewhere: Mutex<Option<String>>,
        asked_elsewhere: AtomicU32,
    }

    impl FakeConnection {
        fn new(node: Node) -> Arc<Self> {
            Arc::new(FakeConnection {
                node: Mutex::new(node),
                probes: AtomicU32::new(0),
                channels: AtomicU32::new(0),
                lost: LostSignal::new(),
                left: Mutex::new(None),
                elsewhere: Mutex::new(Some("rabbit-a".into())),
                asked_elsewhere: AtomicU32::new(0),
            })
        }
    }

    struct FakeChannel(Arc<FakeConnection>);

    impl Connection for Arc<FakeConnection> {
        fn open_channel(&self) -> BoxFuture<'_, Result<Arc<dyn Channel>, TransportError>> {
            self.channels.fetch_add(1, Ordering::Relaxed);
            let channel: Arc<dyn Channel> = Arc::new(FakeChannel(Arc::clone(self)));
            Box::pin(async move { Ok(channel) })
        }
        fn frame_max(&self) -> u32 {
            4096
        }
        fn node(&self) -> String {
            "rabbit-c".into()
        }
        fn lost(&self) -> Lost {
            self.lost.watch()
        }
        fn majority_elsewhere(&self, timeout: Duration) -> BoxFuture<'_, Option<String>> {
            self.asked_elsewhere.fetch_add(1, Ordering::Relaxed);
            let other = self.elsewhere.lock().unwrap().clone();
            Box::pin(async move {
                match other {
                    Some(node) => Some(node),
                    None => {
                        tokio::time::sleep(timeout).await;
                        None
                    }
                }
            })
        }
        fn leave<'a>(&'a self, why: &'a str) -> BoxFuture<'a, ()> {
            *self.left.lock().unwrap() = Some(why.to_owned());
            self.lost.lose(why);
            Box::pin(async {})
        }
        fn close(&self) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    fn unused<'a, T: Send + 'a>() -> BoxFuture<'a, Result<T, TransportError>> {
        Box::pin(async { Err(TransportError::Other("not used".into())) })
    }

    impl Channel for FakeChannel {
        fn declare_exchange<'a>(
            &'a self,
            _: &'a str,
            _: ExchangeKind,
        ) -> BoxFuture<'a, Result<(), TransportError>> {
            unused()
        }
        fn declare_queue<'a>(
            &'a self,
            _: &'a QueueDecl,
        ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
            unused()
        }
        fn bind_queue<'a>(
            &'a self,
            _: &'a rabbit_backoff_core::Binding,
        ) -> BoxFuture<'a, Result<(), TransportError>> {
            unused()
        }
        fn check_exchange<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
            unused()
        }
        fn check_queue<'a>(
            &'a self,
            _: &'a str,
        ) -> BoxFuture<'a, Result<QueueInfo, TransportError>> {
            unused()
        }
        fn qos(&self, _: u16) -> BoxFuture<'_, Result<(), TransportError>> {
            unused()
        }
        fn consume<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Deliveries, TransportError>> {
            unused()
        }
        fn cancel<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
            unused()
        }
        fn get<'a>(
            &'a self,
            _: &'a str,
        ) -> BoxFuture<'a, Result<Option<Delivery>, TransportError>> {
            unused()
        }
        fn publish<'a>(
            &'a self,
            _: Publication<'a>,
        ) -> BoxFuture<'a, Result<Confirm, TransportError>> {
            unused()
        }
        fn delete_queue<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), TransportError>> {
            unused()
        }
        fn probe_metadata(&self) -> BoxFuture<'_, Result<(), TransportError>> {
            self.0.probes.fetch_add(1, Ordering::Relaxed);
            let node = *self.0.node.lock().unwrap();
            Box::pin(async move {
                match node {
                    Node::Healthy => Ok(()),
                    Node::Refusing => Err(TransportError::Closed("channel closed".into())),
                    Node::Cut => std::future::pending().await,
                }
            })
        }
        fn close(&self) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    fn watching(
        connection: &Arc<FakeConnection>,
    ) -> (tokio::task::JoinHandle<()>, Arc<tokio::sync::Notify>) {
        let stop = Arc::new(tokio::sync::Notify::new());
        let dyn_connection: Arc<dyn Connection> = Arc::new(Arc::clone(connection));
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            watch_metadata(dyn_connection, MetadataWatch::default(), async move {
                stopped.notified().await
            })
            .await
        });
        (task, stop)
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_cut_off_is_left_within_the_bound() {
        let connection = FakeConnection::new(Node::Healthy);
        let (task, _stop) = watching(&connection);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!task.is_finished(), "a healthy node is not left");
        assert!(connection.probes.load(Ordering::Relaxed) >= 25);
        assert_eq!(
            connection.channels.load(Ordering::Relaxed),
            1,
            "one channel"
        );

        *connection.node.lock().unwrap() = Node::Cut;
        let cut_at = tokio::time::Instant::now();
        task.await.unwrap();
        let noticed = cut_at.elapsed();
        assert!(
            noticed <= MetadataWatch::default().notices_within(),
            "{noticed:?}"
        );
        let why = connection.left.lock().unwrap().clone().expect("left");
        assert!(
            why.contains("rabbit-c cannot reach its cluster's majority")
                && why.contains("while rabbit-a answered"),
            "{why}"
        );
        assert!(connection.lost.watch().is_lost());
        assert_eq!(
            connection.channels.load(Ordering::Relaxed),
            3,
            "each probe after one unanswered on a channel of its own"
        );
        assert_eq!(connection.asked_elsewhere.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_is_not_left_while_no_other_answers() {
        let connection = FakeConnection::new(Node::Cut);
        *connection.elsewhere.lock().unwrap() = None;
        let (task, stop) = watching(&connection);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!task.is_finished(), "the whole cluster is electing: stay");
        assert!(connection.left.lock().unwrap().is_none());
        let asked = connection.asked_elsewhere.load(Ordering::Relaxed);
        assert!(
            (5..=10).contains(&asked),
            "asked again on each miss: {asked}"
        );

        *connection.elsewhere.lock().unwrap() = Some("rabbit-b".into());
        let answered_at = tokio::time::Instant::now();
        task.await.unwrap();
        assert!(answered_at.elapsed() <= Duration::from_secs(12));
        let why = connection.left.lock().unwrap().clone().expect("left");
        assert!(why.contains("while rabbit-b answered"), "{why}");
        drop(stop);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_is_not_the_signal_and_the_watch_stops_when_told() {
        let connection = FakeConnection::new(Node::Refusing);
        let (task, stop) = watching(&connection);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!task.is_finished());
        assert!(connection.left.lock().unwrap().is_none());
        assert!(
            connection.channels.load(Ordering::Relaxed) > 10,
            "a new channel after each refusal"
        );
        stop.notify_one();
        task.await.unwrap();
        assert!(!connection.lost.watch().is_lost());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_lost_otherwise_ends_the_watch() {
        let connection = FakeConnection::new(Node::Healthy);
        let (task, _stop) = watching(&connection);
        tokio::time::sleep(Duration::from_secs(5)).await;
        connection.lost.lose("reset");
        task.await.unwrap();
        assert!(connection.left.lock().unwrap().is_none());
    }
}
