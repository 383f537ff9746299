//! [`DeadLetterRecord`]: one dead letter as a line of an export file, every
//! property and typed header kept, and read back for an import.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use lapin::BasicProperties;
use lapin::types::{
    AMQPValue, ByteArray, DecimalValue, FieldArray, FieldTable, LongString, ShortString,
};
use serde::{Deserialize, Serialize};

use rabbit_backoff_runtime::transport::Delivery;

/// One dead letter, whole and lossless, as `dlq export` writes it (one JSON
/// object per line) and `dlq import` reads it: every property, every header
/// with its AMQP type, and the body's bytes in base64.
///
/// ```
/// use rabbit_backoff::dead_letters::DeadLetterRecord;
///
/// let line = r#"{"routing_key":"orders.dlq","properties":{"message_id":"m-1",
///   "headers":{"x-retry-count":{"type":"i64","value":3},
///              "x-error":{"type":"longstr","value":"db down"}}},
///   "body":"eyJpZCI6MX0="}"#;
/// let record: DeadLetterRecord = serde_json::from_str(line)?;
/// let (properties, body) = record.message()?;
/// assert_eq!(body, br#"{"id":1}"#);
/// assert_eq!(properties.message_id().as_ref().map(|s| s.as_str()), Some("m-1"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeadLetterRecord {
    /// The exchange it was last published to (empty: the default exchange).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub exchange: String,
    /// The routing key it was last published with.
    #[serde(default)]
    pub routing_key: String,
    /// Its properties and headers.
    pub properties: RecordProperties,
    /// Its body, in base64.
    pub body: String,
}

/// A message's properties; absent ones are left out.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordProperties {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, TypedValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_mode: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<u64>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
}

/// A header value with its AMQP type, so that an import writes back exactly
/// the type that was read (`{"type": "i64", "value": 3}`). Long strings that
/// are not UTF-8, and byte arrays, are base64; floats that JSON cannot hold
/// (NaN, infinities) are their bit patterns.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TypedValue {
    Bool(bool),
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    F32Bits(u32),
    F64(f64),
    F64Bits(u64),
    Decimal { scale: u8, value: u32 },
    Shortstr(String),
    Longstr(String),
    LongstrBase64(String),
    Array(Vec<TypedValue>),
    Timestamp(u64),
    Table(BTreeMap<String, TypedValue>),
    Bytes(String),
    Void,
}

/// Why a record cannot become a message again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RecordError(String);

impl DeadLetterRecord {
    /// The record of a delivered message. Headers the connection set aside
    /// for nesting deeper than
    /// [`MAX_HEADER_DEPTH`](rabbit_backoff_core::MAX_HEADER_DEPTH) levels
    /// would be recorded as the flat table that stands for them: the caller
    /// skips such messages.
    pub(crate) fn of(delivery: &Delivery) -> Self {
        let p = &delivery.properties;
        let text = |s: &Option<ShortString>| s.as_ref().map(|s| s.as_str().to_owned());
        DeadLetterRecord {
            exchange: delivery.exchange.clone(),
            routing_key: delivery.routing_key.clone(),
            properties: RecordProperties {
                content_type: text(p.content_type()),
                content_encoding: text(p.content_encoding()),
                headers: p.headers().as_ref().map(table),
                delivery_mode: *p.delivery_mode(),
                priority: *p.priority(),
                correlation_id: text(p.correlation_id()),
                reply_to: text(p.reply_to()),
                expiration: text(p.expiration()),
                message_id: text(p.message_id()),
                timestamp: *p.timestamp(),
                kind: text(p.kind()),
                user_id: text(p.user_id()),
                app_id: text(p.app_id()),
                cluster_id: text(p.cluster_id()),
            },
            body: STANDARD.encode(&delivery.data),
        }
    }

    /// The message again: its properties and body, exactly as exported.
    pub fn message(&self) -> Result<(BasicProperties, Vec<u8>), RecordError> {
        let body = STANDARD
            .decode(&self.body)
            .map_err(|e| RecordError(format!("body: not base64: {e}")))?;
        let r = &self.properties;
        let short = |name: &str, s: &Option<String>| {
            s.as_deref().map(|s| short_string(name, s)).transpose()
        };
        let mut p = BasicProperties::default();
        if let Some(v) = short("content_type", &r.content_type)? {
            p = p.with_content_type(v);
        }
        if let Some(v) = short("content_encoding", &r.content_encoding)? {
            p = p.with_content_encoding(v);
        }
        if let Some(headers) = &r.headers {
            p = p.with_headers(field_table(headers)?);
        }
        if let Some(v) = r.delivery_mode {
            p = p.with_delivery_mode(v);
        }
        if let Some(v) = r.priority {
            p = p.with_priority(v);
        }
        if let Some(v) = short("correlation_id", &r.correlation_id)? {
            p = p.with_correlation_id(v);
        }
        if let Some(v) = short("reply_to", &r.reply_to)? {
            p = p.with_reply_to(v);
        }
        if let Some(v) = short("expiration", &r.expiration)? {
            p = p.with_expiration(v);
        }
        if let Some(v) = short("message_id", &r.message_id)? {
            p = p.with_message_id(v);
        }
        if let Some(v) = r.timestamp {
            p = p.with_timestamp(v);
        }
        if let Some(v) = short("type", &r.kind)? {
            p = p.with_type(v);
        }
        if let Some(v) = short("user_id", &r.user_id)? {
            p = p.with_user_id(v);
        }
        if let Some(v) = short("app_id", &r.app_id)? {
            p = p.with_app_id(v);
        }
        if let Some(v) = short("cluster_id", &r.cluster_id)? {
            p = p.with_cluster_id(v);
        }
        Ok((p, body))
    }
}

/// A short string, at most 255 bytes as AMQP allows.
fn short_string(what: &str, s: &str) -> Result<ShortString, RecordError> {
    if s.len() > 255 {
        return Err(RecordError(format!(
            "{what} is {} bytes long; AMQP allows at most 255",
            s.len()
        )));
    }
    Ok(ShortString::from(s.to_owned()))
}

fn table(table: &FieldTable) -> BTreeMap<String, TypedValue> {
    table
        .inner()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), typed(v)))
        .collect()
}

fn typed(value: &AMQPValue) -> TypedValue {
    match value {
        AMQPValue::Boolean(b) => TypedValue::Bool(*b),
        AMQPValue::ShortShortInt(n) => TypedValue::I8(*n),
        AMQPValue::ShortShortUInt(n) => TypedValue::U8(*n),
        AMQPValue::ShortInt(n) => TypedValue::I16(*n),
        AMQPValue::ShortUInt(n) => TypedValue::U16(*n),
        AMQPValue::LongInt(n) => TypedValue::I32(*n),
        AMQPValue::LongUInt(n) => TypedValue::U32(*n),
        AMQPValue::LongLongInt(n) => TypedValue::I64(*n),
        AMQPValue::Float(f) if f.is_finite() => TypedValue::F32(*f),
        AMQPValue::Float(f) => TypedValue::F32Bits(f.to_bits()),
        AMQPValue::Double(f) if f.is_finite() => TypedValue::F64(*f),
        AMQPValue::Double(f) => TypedValue::F64Bits(f.to_bits()),
        AMQPValue::DecimalValue(d) => TypedValue::Decimal {
            scale: d.scale,
            value: d.value,
        },
        AMQPValue::ShortString(s) => TypedValue::Shortstr(s.as_str().to_owned()),
        AMQPValue::LongString(s) => match std::str::from_utf8(s.as_bytes()) {
            Ok(text) => TypedValue::Longstr(text.to_owned()),
            Err(_) => TypedValue::LongstrBase64(STANDARD.encode(s.as_bytes())),
        },
        AMQPValue::FieldArray(items) => {
            TypedValue::Array(items.as_slice().iter().map(typed).collect())
        }
        AMQPValue::Timestamp(t) => TypedValue::Timestamp(*t),
        AMQPValue::FieldTable(t) => TypedValue::Table(table(t)),
        AMQPValue::ByteArray(b) => TypedValue::Bytes(STANDARD.encode(b.as_slice())),
        AMQPValue::Void => TypedValue::Void,
    }
}

fn field_table(map: &BTreeMap<String, TypedValue>) -> Result<FieldTable, RecordError> {
    let mut table = FieldTable::default();
    for (name, value) in map {
        let key = short_string("a header name", name)?;
        table.insert(
            key,
            amqp(value).map_err(|e| RecordError(format!("header {name:?}: {e}")))?,
        );
    }
    Ok(table)
}

fn amqp(value: &TypedValue) -> Result<AMQPValue, RecordError> {
    let base64 = |s: &str| {
        STANDARD
            .decode(s)
            .map_err(|e| RecordError(format!("not base64: {e}")))
    };
    Ok(match value {
        TypedValue::Bool(b) => AMQPValue::Boolean(*b),
        TypedValue::I8(n) => AMQPValue::ShortShortInt(*n),
        TypedValue::U8(n) => AMQPValue::ShortShortUInt(*n),
        TypedValue::I16(n) => AMQPValue::ShortInt(*n),
        TypedValue::U16(n) => AMQPValue::ShortUInt(*n),
        TypedValue::I32(n) => AMQPValue::LongInt(*n),
        TypedValue::U32(n) => AMQPValue::LongUInt(*n),
        TypedValue::I64(n) => AMQPValue::LongLongInt(*n),
        TypedValue::F32(f) => AMQPValue::Float(*f),
        TypedValue::F32Bits(bits) => AMQPValue::Float(f32::from_bits(*bits)),
        TypedValue::F64(f) => AMQPValue::Double(*f),
        TypedValue::F64Bits(bits) => AMQPValue::Double(f64::from_bits(*bits)),
        TypedValue::Decimal { scale, value } => AMQPValue::DecimalValue(DecimalValue {
            scale: *scale,
            value: *value,
        }),
        TypedValue::Shortstr(s) => AMQPValue::ShortString(short_string("a shortstr", s)?),
        TypedValue::Longstr(s) => AMQPValue::LongString(LongString::from(s.as_bytes())),
        TypedValue::LongstrBase64(s) => AMQPValue::LongString(LongString::from(base64(s)?)),
        TypedValue::Array(items) => AMQPValue::FieldArray(FieldArray::from(
            items.iter().map(amqp).collect::<Result<Vec<_>, _>>()?,
        )),
        TypedValue::Timestamp(t) => AMQPValue::Timestamp(*t),
        TypedValue::Table(map) => AMQPValue::FieldTable(field_table(map)?),
        TypedValue::Bytes(s) => AMQPValue::ByteArray(ByteArray::from(base64(s)?)),
        TypedValue::Void => AMQPValue::Void,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::stream_protocol::Unsettled;
    use rabbit_backoff_runtime::transport::Acker;

    #[test]
    fn every_type_and_property_round_trips_through_json() {
        let mut inner = FieldTable::default();
        inner.insert("n".into(), AMQPValue::ShortUInt(7));
        let mut headers = FieldTable::default();
        let values = [
            AMQPValue::Boolean(true),
            AMQPValue::ShortShortInt(-3),
            AMQPValue::ShortShortUInt(250),
            AMQPValue::ShortInt(-30000),
            AMQPValue::ShortUInt(60000),
            AMQPValue::LongInt(-2_000_000_000),
            AMQPValue::LongUInt(4_000_000_000),
            AMQPValue::LongLongInt(i64::MIN),
            AMQPValue::Float(1.25),
            AMQPValue::Float(f32::NAN),
            AMQPValue::Double(-0.1),
            AMQPValue::Double(f64::INFINITY),
            AMQPValue::DecimalValue(DecimalValue {
                scale: 2,
                value: 12345,
            }),
            AMQPValue::ShortString("short".into()),
            AMQPValue::LongString("long ✓".into()),
            AMQPValue::LongString(LongString::from(vec![0xff, 0x00, 0xfe])),
            AMQPValue::FieldArray(vec![AMQPValue::Void, AMQPValue::LongInt(1)].into()),
            AMQPValue::Timestamp(1_796_208_007),
            AMQPValue::FieldTable(inner),
            AMQPValue::ByteArray(vec![1u8, 2, 3].into()),
            AMQPValue::Void,
        ];
        for (i, value) in values.iter().enumerate() {
            headers.insert(format!("h{i:02}").into(), value.clone());
        }
        let properties = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_content_encoding("gzip".into())
            .with_headers(headers)
            .with_delivery_mode(2)
            .with_priority(5)
            .with_correlation_id("c".into())
            .with_reply_to("r".into())
            .with_expiration("60000".into())
            .with_message_id("m".into())
            .with_timestamp(1_796_208_007)
            .with_type("order".into())
            .with_user_id("guest".into())
            .with_app_id("shop".into())
            .with_cluster_id("x".into());
        let body = vec![0u8, 159, 146, 150, b'{', b'}'];
        let delivery = Delivery::new(body.clone(), Acker::new(Unsettled))
            .with_route("orders.dlx", "orders.dlq")
            .with_properties(properties.clone());
        let line = serde_json::to_string(&DeadLetterRecord::of(&delivery)).unwrap();
        assert!(!line.contains('\n'));
        let record: DeadLetterRecord = serde_json::from_str(&line).unwrap();
        let (back, back_body) = record.message().unwrap();
        assert_eq!(back_body, body);
        // NaN is not equal to itself: check it is NaN, then compare the rest.
        let without_nan = |p: &BasicProperties| {
            let mut headers = p.headers().clone().expect("headers");
            assert!(
                matches!(headers.inner().get("h09"), Some(AMQPValue::Float(f)) if f.is_nan()),
                "{:?}",
                headers.inner().get("h09")
            );
            headers.insert("h09".into(), AMQPValue::Void);
            p.clone().with_headers(headers)
        };
        assert_eq!(without_nan(&back), without_nan(&properties));
        assert_eq!(record.routing_key, "orders.dlq");
    }

    fn record_error(record: &DeadLetterRecord) -> String {
        record.message().unwrap_err().to_string()
    }

    #[test]
    fn bad_records_say_what_is_wrong() {
        let record: DeadLetterRecord =
            serde_json::from_str(r#"{"properties":{},"body":"not base64!"}"#).unwrap();
        assert!(record.message().unwrap_err().to_string().contains("base64"));
        let wrong_type = serde_json::from_str::<DeadLetterRecord>(
            r#"{"properties":{"headers":{"a":{"type":"i8","value":300}}},"body":""}"#,
        );
        assert!(wrong_type.is_err());
        let long_id: DeadLetterRecord = serde_json::from_str(&format!(
            r#"{{"properties":{{"message_id":"{}"}},"body":""}}"#,
            "x".repeat(256)
        ))
        .unwrap();
        assert!(record_error(&long_id).contains("at most 255"));
    }
}
