//! Where a table is measured: a broker and a queue type; the bench's own
//! lapin connections to it, and which sides it can run.

use std::time::Duration;

use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Connection, ConnectionProperties};
use rabbit_backoff::QueueType;

use crate::say::say;
use crate::side::Side;

/// Where a table is measured: a broker (one node or a cluster's list) and
/// the type of the queues.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) name: &'static str,
    /// An address or a comma-separated list, as `AMQP_URL` takes it.
    pub(crate) url: String,
    pub(crate) queue_type: QueueType,
}

impl Target {
    pub(crate) const NAMES: [&'static str; 3] =
        ["single-classic", "single-quorum", "cluster-quorum"];

    pub(crate) fn named(name: &str) -> Option<Target> {
        let single = rabbit_backoff::amqp_url_from_env;
        let cluster = || {
            std::env::var("CLUSTER_AMQP_URL").unwrap_or_else(|_| {
                (5673..=5675)
                    .map(|port| format!("amqp://guest:guest@127.0.0.1:{port}/%2f"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
        };
        let (name, url, queue_type) = match name {
            "single-classic" => ("single-classic", single(), QueueType::Classic),
            "single-quorum" => ("single-quorum", single(), QueueType::Quorum),
            "cluster-quorum" => ("cluster-quorum", cluster(), QueueType::Quorum),
            _ => return None,
        };
        Some(Target {
            name,
            url,
            queue_type,
        })
    }

    /// The node both sides connect to: the first of the list.
    pub(crate) fn first_node(&self) -> &str {
        self.url.split(',').next().unwrap_or(&self.url).trim()
    }
}

/// Awaits a close of the bench's own lapin connections and channels for at
/// most 5 s, its outcome ignored: lapin can miss the broker's `close-ok` when
/// the socket closes right behind it, and then the close never resolves (the
/// bench's parent hung that way twice in an hour, with no socket left open).
/// The framework's own closes are bounded by the connection's lost watch.
pub(crate) async fn closed(close: impl std::future::Future<Output = lapin::Result<()>>) {
    let _ = tokio::time::timeout(Duration::from_secs(5), close).await;
}

/// A lapin connection to `target`'s first node; an attempt that has not
/// connected in 10 s is given up for another (three in all), as [`closed`]
/// bounds a close.
pub(crate) async fn connect(target: &Target) -> Connection {
    for _ in 0..3 {
        let attempt = Connection::connect(target.first_node(), ConnectionProperties::default());
        if let Ok(connected) = tokio::time::timeout(Duration::from_secs(10), attempt).await {
            return connected.unwrap_or_else(|e| {
                panic!(
                    "no RabbitMQ at {} ({e}); scripts/bench.sh starts one (and the cluster for \
                     cluster-quorum: scripts/cluster.sh up)",
                    target.first_node()
                )
            });
        }
    }
    panic!("connecting to {} hung three times", target.first_node())
}

/// Whether `target`'s broker holds a `modified` delivery back until its
/// `x-opt-delivery-time` (RabbitMQ 4.3 and later), asked as the framework
/// asks it before it declares anything for `retry = "scheduled"`: a broker
/// that applies the delayed retry arguments of 4.3's quorum queues refuses
/// them on a classic queue (`PRECONDITION_FAILED`); 3.10 and 4.0 accept
/// them as any unknown argument.
pub(crate) async fn holds_back(target: &Target) -> bool {
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes()));
    let connection = connect(target).await;
    let channel = connection.create_channel().await.expect("channel");
    let probe = format!("bench.probe.{}", uuid::Uuid::new_v4().simple());
    let mut arguments = FieldTable::default();
    arguments.insert("x-delayed-retry-type".into(), text("failed"));
    arguments.insert("x-delayed-retry-min".into(), AMQPValue::LongLongInt(1));
    arguments.insert("x-expires".into(), AMQPValue::LongLongInt(60_000));
    let declared = channel
        .queue_declare(
            probe.as_str().into(),
            QueueDeclareOptions::default(),
            arguments,
        )
        .await;
    let holds = match declared {
        Err(e) => e.to_string().contains("x-delayed-retry"),
        Ok(_) => {
            let _ = channel
                .queue_delete(probe.as_str().into(), QueueDeleteOptions::default())
                .await;
            closed(channel.close(200, "".into())).await;
            false
        }
    };
    closed(connection.close(200, "".into())).await;
    holds
}

/// The sides of `sides` that run on `target`: those that need RabbitMQ
/// 4.3's held-back retries only on a quorum target of a broker that holds
/// back (a line says which are left out, and why).
pub(crate) async fn sides_on(target: &Target, sides: &[Side]) -> Vec<Side> {
    let needing: Vec<&str> = sides
        .iter()
        .filter(|side| side.needs_scheduled_retries())
        .map(|side| side.name())
        .collect();
    if needing.is_empty() {
        return sides.to_vec();
    }
    let why = if target.queue_type != QueueType::Quorum {
        Some("classic queues")
    } else if !holds_back(target).await {
        Some("a broker before RabbitMQ 4.3, which does not hold a `modified` delivery back")
    } else {
        None
    };
    match why {
        None => sides.to_vec(),
        Some(why) => {
            say!(
                "{}: {} left out: they need a quorum target on RabbitMQ 4.3; this is {why}",
                target.name,
                needing.join(", ")
            );
            sides
                .iter()
                .copied()
                .filter(|side| !side.needs_scheduled_retries())
                .collect()
        }
    }
}
