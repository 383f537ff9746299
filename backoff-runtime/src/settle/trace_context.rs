//! W3C trace context (`traceparent`, `tracestate`) in message headers,
//! through OpenTelemetry's global propagator: read when a delivery is
//! processed, written into every message the framework publishes (a typed
//! publish, a retry, a dead letter, a replay), so that one message's attempts
//! form one trace.
//!
//! The spans are `tracing` spans; with `tracing-opentelemetry`'s layer they
//! become OpenTelemetry spans. Without a propagator and a layer installed,
//! reading finds nothing and writing writes nothing.

use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use tracing_opentelemetry::OpenTelemetrySpanExt;

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

/// Makes `span` continue the trace that `headers` carry, if any.
pub(crate) fn continue_trace(span: &tracing::Span, headers: Option<&FieldTable>) {
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

/// The span of one publish, as OpenTelemetry's messaging conventions name
/// it: `{exchange} publish`, kind producer.
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
