//! The namespaced cluster's three nodes: their names and addresses, a
//! connection to the first that answers, and the cluster made whole again.

use std::time::Duration;

use lapin::{Connection, ConnectionProperties};
use tokio::time::Instant;

use crate::CLUSTER;

/// Heartbeat of the consumer's and publisher's connections: a link that
/// drops packets is noticed within about two of them.
const HEARTBEAT_SECS: u32 = 5;

/// One node: its name and AMQP URL, as `scripts/cluster.sh nodes` prints them.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) url: String,
}

/// The three nodes; fails the test, saying what to do, unless they all run
/// in one cluster.
pub(crate) fn nodes() -> Vec<Node> {
    let status = CLUSTER.script(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    let nodes: Vec<Node> = CLUSTER
        .sh(&["nodes"])
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, url)| Node {
            name: name.to_owned(),
            url: url.to_owned(),
        })
        .collect();
    let members: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("running in the cluster: "))
        .map(|m| m.split_whitespace().collect())
        .unwrap_or_default();
    assert!(
        status.status.success()
            && nodes.len() == 3
            && nodes.iter().all(|n| members.contains(&n.name.as_str())),
        "these tests need the namespaced cluster: run CLUSTER_NETNS=1 scripts/cluster.sh up \
         first (scripts/test.sh does). Its status says:\n{text}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    nodes
}

/// The nodes' URLs as a list, starting with node `first`, with the test's
/// heartbeat.
pub(crate) fn cluster_url(nodes: &[Node], first: usize) -> String {
    (0..nodes.len())
        .map(|k| {
            format!(
                "{}?heartbeat={HEARTBEAT_SECS}",
                nodes[(first + k) % nodes.len()].url
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Which node an address (as `health().node()` shows it) is.
pub(crate) fn node_index(nodes: &[Node], address: &str) -> Option<usize> {
    nodes.iter().position(|n| {
        let host = n.url.split('@').nth(1).and_then(|r| r.split('/').next());
        host.is_some_and(|h| address.contains(h))
    })
}

/// Undoes every fault, and starts any node that is down, when dropped: the
/// next test finds the cluster whole even when this one failed.
pub(crate) struct Heal;

impl Drop for Heal {
    fn drop(&mut self) {
        let _ = CLUSTER.script(&["heal-all"]);
        let _ = CLUSTER.script(&["up"]);
    }
}

/// Waits (bounded) until all three nodes run in the cluster again.
pub(crate) async fn whole_again(within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let output = CLUSTER.script(&["status"]);
        let text = String::from_utf8_lossy(&output.stdout);
        let members = text
            .lines()
            .find_map(|l| l.strip_prefix("running in the cluster: "))
            .map_or(0, |m| m.split_whitespace().count());
        if members == 3 && !text.contains("starting") {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "the cluster was not whole again within {within:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A connection to the first node that answers, starting with `first`.
pub(crate) async fn connect_from(nodes: &[Node], first: usize) -> Connection {
    let mut errors = Vec::new();
    for k in 0..nodes.len() {
        let node = &nodes[(first + k) % nodes.len()];
        match Connection::connect(&node.url, ConnectionProperties::default()).await {
            Ok(connection) => return connection,
            Err(e) => errors.push(format!("{}: {e}", node.name)),
        }
    }
    panic!("no node of the cluster answers ({})", errors.join("; "))
}
