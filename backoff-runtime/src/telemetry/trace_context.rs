//! W3C trace context (`traceparent`, `tracestate`) in message headers,
//! through OpenTelemetry's global propagator: read when a delivery is
//! processed, written into every message the framework publishes (a typed
//! publish, a retry, a dead letter, a replay), so that one message's attempts
//! form one trace.
//!
//! The spans are `tracing` spans; with `tracing-opentelemetry`'s layer they
//! become OpenTelemetry spans. Without a propagator and a layer installed,
//! reading finds nothing and writing writes nothing.
// The benchmarks' build without the call sites leaves these unused.
#![cfg_attr(rabbit_backoff_bare, allow(unused_imports, dead_code))]

use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::transport::Delivery;

/// Headers read as a carrier.
struct Reader<'a>(&'a FieldTable);

impl Extractor for Reader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match self.0.inner().get(key)? {
            AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok(),
            AMQPValue::ShortString(s) => Some(s.as_str()),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        self.0.inner().keys().map(|k| k.as_str()).collect()
    }
}

/// Headers written as a carrier.
struct Writer<'a>(&'a mut FieldTable);

impl Injector for Writer<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let Ok(key) = ShortString::try_new(key) {
            self.0
                .insert(key, AMQPValue::LongString(LongString::from(value)));
        }
    }
}

/// The span of one delivery's processing, continuing the trace its headers
/// carry: `queue`, `message_id` and `attempt` for logs, the rest for
/// OpenTelemetry's messaging conventions.
#[cfg(not(rabbit_backoff_bare))]
pub(crate) fn delivery_span(queue: &str, delivery: &Delivery, retry_count: u32) -> tracing::Span {
    let message_id = delivery
        .properties
        .message_id()
        .as_ref()
        .map_or("-", |s| s.as_str());
    let span = tracing::info_span!(
        "delivery",
        queue,
        message_id,
        attempt = retry_count.saturating_add(1),
        otel.name = %format_args!("{queue} process"),
        otel.kind = "consumer",
        messaging.system = "rabbitmq",
        messaging.operation.type = "process",
        messaging.destination.name = queue,
        messaging.rabbitmq.destination.routing_key = delivery.routing_key.as_str(),
        messaging.message.id = message_id,
        // Recorded when the attempt fails (`failure_log::record_failure`).
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    continue_trace(&span, delivery.properties.headers().as_ref());
    span
}

/// No span, in a build without the span call sites (benchmarks only).
#[cfg(rabbit_backoff_bare)]
pub(crate) fn delivery_span(_: &str, _: &Delivery, _: u32) -> tracing::Span {
    tracing::Span::none()
}

/// Makes `span` continue the trace that `headers` carry, if any.
fn continue_trace(span: &tracing::Span, headers: Option<&FieldTable>) {
    // No subscriber records the span: nothing to continue, nothing to read.
    let Some(headers) = headers.filter(|_| !span.is_disabled()) else {
        return;
    };
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Reader(headers)));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// Links `span` to the trace that `headers` carry (a replay to its failure).
pub(crate) fn link_trace(span: &tracing::Span, headers: Option<&FieldTable>) {
    let Some(headers) = headers else { return };
    let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Reader(headers)));
    let linked = cx.span().span_context().clone();
    if linked.is_valid() {
        span.add_link(linked);
    }
}

/// Writes `span`'s trace context into `headers`, replacing what they carried.
pub(crate) fn inject(span: &tracing::Span, headers: &mut FieldTable) {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return;
    }
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut Writer(headers)));
}

/// No span, in a build without the span call sites (benchmarks only).
#[cfg(rabbit_backoff_bare)]
pub(crate) fn publish_span(_: &str, _: &str) -> tracing::Span {
    tracing::Span::none()
}

/// The span of one publish, as OpenTelemetry's messaging conventions name
/// it: `{exchange} publish`, kind producer.
#[cfg(not(rabbit_backoff_bare))]
pub(crate) fn publish_span(exchange: &str, routing_key: &str) -> tracing::Span {
    let destination = if exchange.is_empty() {
        "amq.default"
    } else {
        exchange
    };
    tracing::info_span!(
        "publish",
        otel.name = %format_args!("{destination} publish"),
        otel.kind = "producer",
        messaging.system = "rabbitmq",
        messaging.operation.type = "publish",
        messaging.destination.name = destination,
        messaging.rabbitmq.destination.routing_key = routing_key,
    )
}

/// `properties` carrying `span`'s trace context; unchanged (not copied) when
/// no trace is being recorded.
pub(crate) fn traced(
    span: &tracing::Span,
    properties: lapin::BasicProperties,
) -> lapin::BasicProperties {
    if span.is_disabled() || !span.context().span().span_context().is_valid() {
        return properties;
    }
    let mut headers = properties.headers().clone().unwrap_or_default();
    inject(span, &mut headers);
    properties.with_headers(headers)
}
