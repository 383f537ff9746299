//! Noticing, between two reconnection attempts, that a broker which was down
//! accepts connections again.

use rabbit_backoff_core::{ProbeVerdict, ReconnectProbe, ReturnWatch};

use crate::transport::Transport;
use crate::transport::net::node_probe::ProbeTargets;

/// Returns once a node of `transport` that refused connections accepts them
/// again, probing every [`ReconnectProbe::pause`]; never, when there is
/// nothing to learn by probing (no address, or every node up all along).
/// Meant to be raced against the backoff's sleep.
pub(crate) async fn broker_returns(transport: &dyn Transport, probe: ReconnectProbe) {
    let addresses = transport.probe_addresses();
    let targets = ProbeTargets::resolve(&addresses).await;
    let mut watch = ReturnWatch::new(targets.len());
    loop {
        let outcomes = targets.probe(&watch.to_probe()).await;
        match watch.observe(&outcomes) {
            ProbeVerdict::ConnectNow { node } => {
                if let Some((host, port)) = addresses.get(node) {
                    tracing::info!("{host}:{port} accepts connections again; reconnecting now");
                }
                return;
            }
            ProbeVerdict::Continue => tokio::time::sleep(probe.pause(fastrand::f64())).await,
            ProbeVerdict::Stop => std::future::pending::<()>().await,
            // Not reached with the core pinned exactly (`=0.1.0`);
            // `ProbeVerdict` is `#[non_exhaustive]` for services, so Rust
            // wants this arm: stop probing, the backoff decides when to
            // reconnect.
            _ => std::future::pending::<()>().await,
        }
    }
}
