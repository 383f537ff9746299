//! The console's connection for depths and retry tiers: opened on first
//! use and kept, dropped after an error so that the next read opens a new
//! one.

use std::sync::Arc;

use rabbit_backoff_runtime::Error;
use rabbit_backoff_runtime::transport::Connection;

/// A connection to the broker, opened once.
#[derive(Default)]
pub(crate) struct Reader(tokio::sync::Mutex<Option<Arc<dyn Connection>>>);

impl Reader {
    /// The connection to `amqp_url`, opened on first use.
    pub(crate) async fn connection(&self, amqp_url: &str) -> Result<Arc<dyn Connection>, Error> {
        let mut reader = self.0.lock().await;
        if let Some(connection) = &*reader {
            return Ok(Arc::clone(connection));
        }
        let connection = rabbit_backoff_runtime::connect(amqp_url).await?;
        *reader = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// Closes and drops the connection, so that the next read opens a new
    /// one.
    pub(crate) async fn forget(&self) {
        if let Some(connection) = self.0.lock().await.take() {
            connection.close().await;
        }
    }
}
