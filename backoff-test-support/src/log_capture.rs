//! [`LogCapture`]: the log lines a test's runtime writes, kept in memory.

use std::sync::{Arc, Mutex};

/// The lines logged on this thread while it lives, through a `fmt`
/// subscriber with a filter (tests on a current-thread runtime: the
/// runtime's tasks log here too).
pub struct LogCapture {
    lines: Arc<Mutex<Vec<u8>>>,
    _default: tracing::subscriber::DefaultGuard,
}

/// The writer the subscriber writes each line to.
#[derive(Clone)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    /// Starts capturing on this thread what `filter` (an `EnvFilter`
    /// directive: `warn`, `rabbit_backoff=debug`) lets through.
    pub fn start(filter: &str) -> Self {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Sink(Arc::clone(&lines));
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        LogCapture {
            lines,
            _default: tracing::subscriber::set_default(subscriber),
        }
    }

    /// Every line captured so far.
    pub fn lines(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&lines).into_owned()
    }

    /// The warnings captured so far that contain `text`.
    pub fn warnings_with(&self, text: &str) -> Vec<String> {
        self.lines()
            .lines()
            .filter(|line| line.contains(" WARN ") && line.contains(text))
            .map(str::to_owned)
            .collect()
    }
}
