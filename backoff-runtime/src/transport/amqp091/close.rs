//! Closing a lapin connection or channel as a courtesy: bounded in time,
//! given up when the connection is lost, a failure only logged.

use std::future::Future;
use std::time::Duration;

use futures_util::FutureExt;

use super::lapin_error::transport_error;
use crate::transport::connection_loss::Lost;

/// How long a close (of a connection, on leaving a node too, or of a
/// channel) waits for the broker to confirm it before the connection or
/// channel is dropped: the close is a courtesy, and a shutdown must not
/// hang on a broker, or a client library, that never answers it.
pub(super) const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Awaits `closing`, lapin's close of a connection or a channel (`what`),
/// unless its connection is `lost` first, for [`CLOSE_TIMEOUT`] at most; a
/// failure is only logged.
pub(super) async fn close_quietly(
    lost: &Lost,
    what: &str,
    closing: impl Future<Output = lapin::Result<()>>,
) {
    let closing = lost.or_fail(closing.map(|c| c.map_err(transport_error)));
    match tokio::time::timeout(CLOSE_TIMEOUT, closing).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("closing {what}: {e}"),
        Err(_) => tracing::debug!("closing {what}: not confirmed within {CLOSE_TIMEOUT:?}"),
    }
}
