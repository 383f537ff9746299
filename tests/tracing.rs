//! Traces across every hop: with `tracing-opentelemetry` and the W3C
//! propagator installed, a message's publish, each attempt and each
//! republish form one trace, and a replay links back to the failure. Its own
//! test binary: it installs the process-wide subscriber and propagator. On
//! the in-memory broker, with paused time.

mod common;

use std::sync::OnceLock;

use common::*;
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use rabbit_backoff::Publisher;
use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq};
use rabbit_backoff::prelude::*;
use rabbit_backoff::testing::TestBroker;
use tracing_subscriber::prelude::*;

fn exporter() -> InMemorySpanExporter {
    static EXPORTER: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTER
        .get_or_init(|| {
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter.clone())
                .build();
            opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
            tracing_subscriber::registry()
                .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("tests")))
                .init();
            exporter
        })
        .clone()
}

/// The finished spans named `name`.
fn spans(name: &str) -> Vec<SpanData> {
    exporter()
        .get_finished_spans()
        .expect("the spans")
        .into_iter()
        .filter(|s| s.name == name)
        .collect()
}

async fn start(broker: &TestBroker, queue: &str) -> (rabbit_backoff::RunningRuntime, Journal) {
    let journal = Journal::default();
    let running = Runtime::builder()
        .transport(broker.clone())
        .state(journal.clone())
        .handle_signals(false)
        .consumer_with(process_job, |spec| spec.queue = queue.to_owned())
        .start()
        .await
        .expect("starts");
    (running, journal)
}

/// A consumer of `queue` on a new in-memory broker handles one message that
/// fails once: published, retried, handled; then stops.
async fn one_retry(queue: &str) {
    let broker = TestBroker::new();
    let (running, journal) = start(&broker, queue).await;
    let publisher = Publisher::with_transport(broker.clone()).await.unwrap();
    let mut spec = process_job.spec();
    spec.queue = queue.to_owned();
    publisher
        .publish_to(&spec, &Job::new(1, Fail::Transient, Some(1)))
        .await
        .unwrap();
    broker.run_until_idle().await;
    assert!(journal.reached(1, 1), "retried, then handled");
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_message_and_its_retry_are_one_trace() {
    exporter();
    let queue = unique("traced");
    one_retry(&queue).await;

    let published = spans(&format!("{queue} publish"));
    let processed = spans(&format!("{queue} process"));
    let retried = spans(&format!("{queue}.retry publish"));
    assert_eq!((published.len(), processed.len(), retried.len()), (1, 2, 1));
    let trace: TraceId = published[0].span_context.trace_id();
    for span in processed.iter().chain(&retried) {
        assert_eq!(
            span.span_context.trace_id(),
            trace,
            "{} is in the publisher's trace",
            span.name
        );
    }
    let (first, second) = if processed[0].start_time <= processed[1].start_time {
        (&processed[0], &processed[1])
    } else {
        (&processed[1], &processed[0])
    };
    let id = |s: &SpanData| -> SpanId { s.span_context.span_id() };
    assert_eq!(
        first.parent_span_id,
        id(&published[0]),
        "attempt 1 continues the publish"
    );
    assert_eq!(
        retried[0].parent_span_id,
        id(first),
        "the retry is published from attempt 1"
    );
    assert_eq!(
        second.parent_span_id,
        id(&retried[0]),
        "attempt 2 continues the retry's publish"
    );
    let kind = |s: &SpanData| format!("{:?}", s.span_kind);
    assert_eq!(kind(first), "Consumer");
    assert_eq!(kind(&retried[0]), "Producer");
    let has = |s: &SpanData, key: &str, value: &str| {
        s.attributes
            .iter()
            .any(|kv| kv.key.as_str() == key && kv.value.as_str() == value)
    };
    assert!(has(first, "messaging.system", "rabbitmq"));
    assert!(has(first, "messaging.destination.name", &queue));
    // The failed attempt's span says so, with the error, whatever the log
    // lines (sampled under a flood) say; the attempt that succeeded does not.
    assert!(
        matches!(&first.status, opentelemetry::trace::Status::Error { description } if description.contains("unavailable")),
        "{:?}",
        first.status
    );
    assert_eq!(second.status, opentelemetry::trace::Status::Unset);
}

#[tokio::test(start_paused = true)]
async fn a_dead_letter_carries_the_trace_and_a_replay_links_to_it() {
    exporter();
    let broker = TestBroker::new();
    let queue = unique("traced-dead");
    let (running, _journal) = start(&broker, &queue).await;
    let publisher = Publisher::with_transport(broker.clone()).await.unwrap();
    let mut spec = process_job.spec();
    spec.queue = queue.clone();
    publisher
        .publish_to(&spec, &Job::new(2, Fail::Permanent, None))
        .await
        .unwrap();
    broker.run_until_idle().await;
    running.stop().await.unwrap();

    let trace = spans(&format!("{queue} publish"))[0]
        .span_context
        .trace_id();
    let dead = broker.dead_letters(&format!("{queue}.dlq"));
    let traceparent = dead[0]
        .header_str("traceparent")
        .expect("the dead letter carries a traceparent");
    assert!(
        traceparent.contains(&trace.to_string()),
        "{traceparent} is in the trace {trace}"
    );

    let dlq = Dlq::with_transport(broker.clone(), &spec).await.unwrap();
    let report = dlq
        .replay(&DeadLetterFilter::default(), &Default::default())
        .await
        .unwrap();
    assert_eq!(report.matched.len(), 1);
    dlq.close().await;
    let replays = spans(&format!("{queue}.dlq replay"));
    assert_eq!(replays.len(), 1);
    let links = &replays[0].links.links;
    assert_eq!(links.len(), 1, "the replay links to the failure");
    assert_eq!(links[0].span_context.trace_id(), trace);
    assert_ne!(
        replays[0].span_context.trace_id(),
        trace,
        "a replay is a trace of its own"
    );
    let replayed = broker.messages(&queue);
    let replayed_parent = replayed[0]
        .header_str("traceparent")
        .expect("the replayed copy is traced");
    assert!(replayed_parent.contains(&replays[0].span_context.trace_id().to_string()));
}

/// `rabbit_backoff=debug` is the filter users type (docs/one-message.md's
/// and the examples'): a filter's target matches every target it starts, so
/// it turns on the lines of every crate of the framework (their targets are
/// their modules' paths, `rabbit_backoff_runtime::consume::…`); a filter
/// for another target leaves them off.
#[tokio::test(start_paused = true)]
async fn the_log_filter_users_type_is_rabbit_backoff() {
    for (filter, shown) in [("rabbit_backoff=debug", true), ("lapin=debug", false)] {
        let captured = rabbit_backoff_test_support::log_capture::LogCapture::start(filter);
        let queue = unique("log-filter");
        one_retry(&queue).await;
        let lines = captured.lines();
        assert_eq!(
            lines.contains("rabbit_backoff_runtime::") && lines.contains(&queue),
            shown,
            "{filter}: {lines}"
        );
    }
}

/// `retry = "scheduled"` (RabbitMQ 4.3, over AMQP 1.0): no copy carries a
/// new trace context, so every attempt continues the publish, one span per
/// attempt, all in the publisher's trace. On a broker before 4.3 the
/// consumer refuses to start (`tests/scheduled_retry.rs`), and there is no
/// attempt to trace: asserted here as a refusal.
#[tokio::test]
async fn scheduled_retries_are_attempts_of_one_trace() {
    exporter();
    let queue = unique("traced-scheduled");
    let journal = Journal::default();
    let runtime = test_runtime(journal.clone())
        .consumer_with(process_job, |spec| {
            spec.queue = queue.clone();
            spec.queue_type = Some(rabbit_backoff::QueueType::Quorum);
            spec.retry = rabbit_backoff::RetryBackend::Scheduled;
            spec.delays = "100ms".parse().unwrap();
        })
        .build()
        .expect("a valid runtime");
    let spec = runtime.specs().next().cloned().unwrap();
    let _cleanup = Cleanup::of(&spec);
    if broker_version() < (4, 3) {
        let refused = tokio::time::timeout(std::time::Duration::from_secs(30), runtime.run()).await;
        assert!(matches!(refused, Ok(Err(_))), "{refused:?}");
        return;
    }
    let shutdown = runtime.shutdown_handle();
    let health = runtime.health();
    let task = tokio::spawn(runtime.run());
    eventually(
        "the consumer is ready",
        std::time::Duration::from_secs(30),
        || health.is_ready(),
    )
    .await;
    let publisher = Publisher::connect(&url()).await.unwrap();
    publisher
        .publish_to(&spec, &Job::new(1, Fail::Transient, Some(1)))
        .await
        .unwrap();
    eventually(
        "retried, then handled",
        std::time::Duration::from_secs(30),
        || journal.reached(1, 1),
    )
    .await;
    shutdown.shutdown();
    task.await.unwrap().unwrap();
    publisher.close().await;

    let published = spans(&format!("{queue} publish"));
    let processed = spans(&format!("{queue} process"));
    assert_eq!((published.len(), processed.len()), (1, 2));
    for attempt in &processed {
        assert_eq!(
            attempt.span_context.trace_id(),
            published[0].span_context.trace_id(),
            "each attempt is in the publisher's trace"
        );
        assert_eq!(
            attempt.parent_span_id,
            published[0].span_context.span_id(),
            "each attempt continues the publish"
        );
    }
    let failed = processed
        .iter()
        .filter(|s| matches!(s.status, opentelemetry::trace::Status::Error { .. }))
        .count();
    assert_eq!(failed, 1, "the failed attempt says so");
}
