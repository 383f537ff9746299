//! A healthy start on RabbitMQ 4.3 logs no ERROR and no WARN line at the
//! default filter, with the backends that ask whether the broker holds
//! retries back (`"delayed"` and `"scheduled"`): that question used to be a
//! declaration the broker refused, which lapin logs at ERROR on its own
//! thread. A process of its own, with a global subscriber, so that lapin's
//! threads log into it too.

mod common;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::*;
use rabbit_backoff::prelude::*;
use rabbit_backoff::transport::{AmqpTransport, Transport};
use rabbit_backoff::{QueueType, RetryBackend};

/// Every line logged in this process at `warn` and above.
fn captured() -> &'static Arc<Mutex<Vec<u8>>> {
    static LINES: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines: Arc<Mutex<Vec<u8>>> = Arc::default();
        let sink = Arc::clone(&lines);
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
            .with_writer(move || Sink(Arc::clone(&sink)))
            .with_ansi(false)
            .init();
        lines
    })
}

/// The writer of the captured lines.
struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn lines() -> String {
    String::from_utf8_lossy(&captured().lock().unwrap()).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_start_on_4_3_logs_no_error_and_no_warning() {
    captured();
    for backend in [RetryBackend::Delayed, RetryBackend::Scheduled] {
        let queue = unique("quiet-start");
        let runtime = Runtime::builder()
            .uri(url_4_3())
            .state(Journal::default())
            .handle_signals(false)
            .shutdown_grace(Duration::from_secs(5))
            .consumer_with(process_job, |s| {
                s.queue = queue.clone();
                s.queue_type = Some(QueueType::Quorum);
                s.retry = backend;
            })
            .build()
            .expect("a valid runtime");
        let spec = runtime.specs().next().cloned().expect("one consumer");
        let _cleanup = Cleanup::of(&spec).at(&url_4_3());
        let running = runtime.start().await.expect("starts on 4.3");
        running.stop().await.expect("stops");
    }
    let logged = lines();
    assert!(
        !logged.contains("ERROR") && !logged.contains(" WARN "),
        "a healthy start logged:\n{logged}"
    );

    // The capture sees lapin's own lines: a channel the broker closes is
    // logged at ERROR, as the refused probe was.
    let transport = AmqpTransport::new(url_4_3());
    let connection = transport.connect().await.expect("connects");
    let channel = connection.open_channel().await.expect("a channel");
    let missing = unique("quiet-start-missing");
    assert!(channel.check_queue(&missing).await.is_err());
    connection.close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        lines().contains("ERROR lapin"),
        "lapin's refusal line was not captured:\n{}",
        lines()
    );
}
