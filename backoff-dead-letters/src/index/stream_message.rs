//! A message read from a stream over the stream protocol, turned back into
//! the AMQP 0-9-1 properties, headers and body that the broker delivers for
//! it over AMQP, so that the index reads both the same way (keys, groups,
//! filters).
//!
//! A message published over AMQP 0-9-1 is stored in a stream as AMQP 1.0,
//! and the broker converts it back for an AMQP 0-9-1 consumer. The rules
//! followed here are the broker's (RabbitMQ 4.x `mc_amqpl`, and what 3.10
//! stores):
//!
//! | AMQP 0-9-1 | stored as (3.10) | stored as (4.x) |
//! | --- | --- | --- |
//! | `message-id`, `correlation-id` | properties | properties |
//! | `timestamp` (s) | `creation-time` (ms) | `creation-time` (ms) |
//! | `content-type`, `content-encoding`, `user-id`, `reply-to` | properties | properties |
//! | `type`, `app-id` | application property `x-basic-type`, `x-basic-app-id` | annotation `x-basic-type`, property `group-id` |
//! | `delivery-mode`, `priority`, `expiration` | annotations `x-basic-*` | header section |
//! | headers of simple values | application properties | `x-…`: message annotations; others: application properties |
//! | headers of arrays and tables (`x-death`) | dropped | `x-…`: message annotations (not given back over AMQP); others: dropped |
//!
//! Over AMQP the broker gives back every simple application property and
//! every `x-` message annotation as a header, except its own (`x-basic-*`,
//! `x-exchange`, `x-routing-key`, `x-death`); a binary value as a byte array
//! on 3.10, a long string on 4.x.
//!
//! Each stream entry is the message's AMQP 1.0 encoding, decoded here by
//! `fe2o3-amqp-types` (the sections, typed ids, timestamps in milliseconds,
//! floats). A message with a list or map that the broker would give back (a
//! custom `x-` header holding an array or a table; 4.x's `x-opt-deaths`) is
//! [`Unconvertible`], so that its range is read over AMQP instead.

use fe2o3_amqp_types::messaging::annotations::OwnedKey;
use fe2o3_amqp_types::messaging::message::DecodeIntoMessage;
use fe2o3_amqp_types::messaging::{Body, Message, MessageId};
use fe2o3_amqp_types::primitives::{SimpleValue, Value};
use lapin::BasicProperties;
use lapin::types::{AMQPValue, ByteArray, FieldTable, LongString, ShortString};
use serde_amqp::descriptor::Descriptor;
use serde_amqp::read::SliceReader;

/// How the broker gives back a binary header value over AMQP 0-9-1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryHeaders {
    /// A byte array (RabbitMQ 3.x).
    ByteArray,
    /// A long string (RabbitMQ 4.x).
    LongString,
}

/// Why a message could not be turned back into AMQP 0-9-1 here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unconvertible {
    /// Its body is not data sections (an AMQP value or sequence, which no
    /// AMQP 0-9-1 publisher writes).
    #[error("its body is not a data section")]
    Body,
    /// An annotation the broker gives back holds a list or a map.
    #[error("its annotation '{0}' holds a list or a map")]
    Collection(String),
    /// Its bytes are not an AMQP 1.0 message.
    #[error("it is not an AMQP 1.0 message ({0})")]
    Undecodable(String),
    /// It is stored in a sub-batch (several messages in one entry, maybe
    /// compressed, as a stream-protocol publisher may write them).
    #[error("it is stored in a sub-batch")]
    SubBatch,
}

/// The AMQP 0-9-1 properties and body of the AMQP 1.0 message encoded in
/// `bytes` (a stream entry), as the broker delivers them over AMQP (less the
/// `x-stream-offset` header it adds).
pub(crate) fn amqp_091_of(
    bytes: &[u8],
    binary: BinaryHeaders,
) -> Result<(BasicProperties, Vec<u8>), Unconvertible> {
    let message = Body::<Value>::decode_message_from_reader(SliceReader::new(bytes))
        .map_err(|e| Unconvertible::Undecodable(e.to_string()))?;
    // The typed header gives an absent priority its default (4), where the
    // broker gives none back: whether it is set is read from the bytes.
    convert(&message, header_has_priority(bytes), binary)
}

/// Whether the message encoded in `bytes` starts with a header section
/// whose priority field is set (not absent, not null).
fn header_has_priority(bytes: &[u8]) -> bool {
    let Ok(Value::Described(first)) = serde_amqp::from_slice::<Value>(bytes) else {
        return false;
    };
    let header = match &first.descriptor {
        Descriptor::Code(code) => *code == HEADER_CODE,
        Descriptor::Name(name) => name.as_str() == "amqp:header:list",
    };
    match &first.value {
        Value::List(fields) if header => !matches!(fields.get(1), None | Some(Value::Null)),
        _ => false,
    }
}

/// The descriptor code of the header section.
const HEADER_CODE: u64 = 0x70;

/// The AMQP 0-9-1 properties and body of `message`, whose header section
/// (if any) sets its priority or not (`priority`).
fn convert(
    message: &Message<Body<Value>>,
    priority: bool,
    binary: BinaryHeaders,
) -> Result<(BasicProperties, Vec<u8>), Unconvertible> {
    let mut properties = BasicProperties::default();
    let mut headers = FieldTable::default();
    let annotation = |name: &str| {
        message
            .message_annotations
            .as_ref()
            .and_then(|annotations| {
                annotations.iter().find_map(|(key, value)| match key {
                    OwnedKey::Symbol(symbol) if symbol.as_str() == name => Some(value),
                    _ => None,
                })
            })
    };
    if let Some(section) = &message.properties {
        if let Some(id) = &section.message_id {
            match message_id(id) {
                Id::Property(id) => properties = properties.with_message_id(id),
                Id::Header(value) => {
                    headers.insert("x-message-id".into(), value);
                }
            }
        }
        if let Some(id) = &section.correlation_id {
            match message_id(id) {
                Id::Property(id) => properties = properties.with_correlation_id(id),
                Id::Header(value) => {
                    headers.insert("x-correlation-id".into(), value);
                }
            }
        }
        if let Some(at) = &section.creation_time {
            properties = properties.with_timestamp(at.milliseconds().div_euclid(1000) as u64);
        }
        if let Some(kind) = &section.content_type {
            properties = properties.with_content_type(short(kind.as_str()));
        }
        if let Some(encoding) = &section.content_encoding {
            properties = properties.with_content_encoding(short(encoding.as_str()));
        }
        if let Some(user) = section
            .user_id
            .as_ref()
            .and_then(|u| std::str::from_utf8(u).ok())
            .filter(|u| u.len() <= 255)
        {
            properties = properties.with_user_id(short(user));
        }
        if let Some(reply_to) = &section.reply_to {
            let reply_to = reply_to.strip_prefix("/queues/").unwrap_or(reply_to);
            properties = properties.with_reply_to(short(reply_to));
        }
        if let Some(group) = section.group_id.as_deref().filter(|g| g.len() <= 255) {
            properties = properties.with_app_id(short(group));
        }
    }
    match &message.header {
        Some(header) => {
            properties = properties.with_delivery_mode(if header.durable { 2 } else { 1 });
            if priority {
                properties = properties.with_priority(header.priority.0);
            }
            if let Some(ttl) = header.ttl {
                properties = properties.with_expiration(short(&ttl.to_string()));
            }
        }
        None => {
            if let Some(mode) = annotation("x-basic-delivery-mode").and_then(integer) {
                properties = properties.with_delivery_mode(mode as u8);
            }
            if let Some(priority) = annotation("x-basic-priority").and_then(integer) {
                properties = properties.with_priority(priority as u8);
            }
            if let Some(ttl) = annotation("x-basic-expiration").and_then(text) {
                properties = properties.with_expiration(short(ttl));
            }
        }
    }
    let application = message.application_properties.as_ref();
    let from_application = |name: &str| match application.and_then(|a| a.get(name)) {
        Some(SimpleValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    if let Some(kind) = annotation("x-basic-type")
        .and_then(text)
        .or_else(|| from_application("x-basic-type"))
    {
        properties = properties.with_type(short(kind));
    }
    if let Some(app) = from_application("x-basic-app-id") {
        properties = properties.with_app_id(short(app));
    }
    if let Some(application) = application {
        for (name, value) in application.iter() {
            if name.len() > 255 || name.starts_with("x-basic-") {
                continue;
            }
            if let Some(value) = simple_property(value, binary) {
                headers.insert(name.as_str().into(), value);
            }
        }
    }
    if let Some(annotations) = &message.message_annotations {
        for (key, value) in annotations.iter() {
            let OwnedKey::Symbol(name) = key else {
                continue;
            };
            let name = match name.as_str() {
                "x-cc" => "CC",
                "x-opt-deaths" => return Err(Unconvertible::Collection(name.to_string())),
                name if !name.starts_with("x-") || name.len() > 255 || internal(name) => {
                    continue;
                }
                name => name,
            };
            match value {
                Value::List(_) | Value::Map(_) | Value::Array(_) => {
                    return Err(Unconvertible::Collection(name.to_owned()));
                }
                value => {
                    if let Some(value) = simple(value, binary) {
                        headers.insert(name.into(), value);
                    }
                }
            }
        }
    }
    if !headers.inner().is_empty() {
        properties = properties.with_headers(headers);
    }
    let body = match &message.body {
        Body::Data(sections) => sections
            .iter()
            .flat_map(|data| data.0.iter().copied())
            .collect(),
        Body::Empty => Vec::new(),
        Body::Value(_) | Body::Sequence(_) => return Err(Unconvertible::Body),
    };
    Ok((properties, body))
}

/// The annotations the broker keeps for itself rather than give back as
/// headers.
fn internal(name: &str) -> bool {
    name.starts_with("x-basic-") || matches!(name, "x-routing-key" | "x-exchange" | "x-death")
}

/// Where a message or correlation id goes.
#[derive(Debug, PartialEq)]
enum Id {
    /// The property, as it is.
    Property(ShortString),
    /// A header (`x-message-id`, `x-correlation-id`): a binary id, or a
    /// string too long for the property.
    Header(AMQPValue),
}

/// Where the broker puts the id `id`: a string, a number or a UUID
/// (`urn:uuid:…`) in the property, a binary id or a string too long for the
/// property in a header.
fn message_id(id: &MessageId) -> Id {
    match id {
        MessageId::String(s) if s.len() <= 255 => Id::Property(short(s)),
        MessageId::String(s) => Id::Header(AMQPValue::LongString(LongString::from(s.as_bytes()))),
        MessageId::Ulong(n) => Id::Property(short(&n.to_string())),
        MessageId::Uuid(uuid) => {
            Id::Property(short(&format!("urn:uuid:{}", hyphenated(uuid.as_inner()))))
        }
        MessageId::Binary(bytes) => {
            Id::Header(AMQPValue::ByteArray(ByteArray::from(bytes.to_vec())))
        }
    }
}

/// The hyphenated lowercase text of a UUID's 16 bytes.
fn hyphenated(bytes: &[u8; 16]) -> String {
    let mut out = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// A short string.
fn short(s: &str) -> ShortString {
    ShortString::from(s)
}

/// The text of a string or symbol annotation.
fn text(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) => Some(s),
        Value::Symbol(s) => Some(s.as_str()),
        _ => None,
    }
}

/// The number of an integer annotation.
fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Ubyte(n) => Some(i64::from(*n)),
        Value::Ushort(n) => Some(i64::from(*n)),
        Value::Uint(n) => Some(i64::from(*n)),
        Value::Ulong(n) => i64::try_from(*n).ok(),
        Value::Byte(n) => Some(i64::from(*n)),
        Value::Short(n) => Some(i64::from(*n)),
        Value::Int(n) => Some(i64::from(*n)),
        Value::Long(n) => Some(*n),
        _ => None,
    }
}

/// The header value of an application property, as the broker gives it
/// back.
fn simple_property(value: &SimpleValue, binary: BinaryHeaders) -> Option<AMQPValue> {
    let value = match value {
        SimpleValue::Null => Value::Null,
        SimpleValue::Bool(b) => Value::Bool(*b),
        SimpleValue::Ubyte(n) => Value::Ubyte(*n),
        SimpleValue::Ushort(n) => Value::Ushort(*n),
        SimpleValue::Uint(n) => Value::Uint(*n),
        SimpleValue::Ulong(n) => Value::Ulong(*n),
        SimpleValue::Byte(n) => Value::Byte(*n),
        SimpleValue::Short(n) => Value::Short(*n),
        SimpleValue::Int(n) => Value::Int(*n),
        SimpleValue::Long(n) => Value::Long(*n),
        SimpleValue::Float(f) => Value::Float(*f),
        SimpleValue::Double(d) => Value::Double(*d),
        SimpleValue::Timestamp(t) => Value::Timestamp(t.clone()),
        SimpleValue::Binary(b) => Value::Binary(b.clone()),
        SimpleValue::String(s) => Value::String(s.clone()),
        SimpleValue::Symbol(s) => Value::Symbol(s.clone()),
        SimpleValue::Decimal32(_)
        | SimpleValue::Decimal64(_)
        | SimpleValue::Decimal128(_)
        | SimpleValue::Char(_)
        | SimpleValue::Uuid(_)
        | SimpleValue::Described(_) => return None,
    };
    simple(&value, binary)
}

/// The header value of a simple AMQP 1.0 value, as the broker gives it
/// back (none for a char, a UUID, a decimal or a described value, which it
/// does not; nor for a list or a map, which the caller refuses).
fn simple(value: &Value, binary: BinaryHeaders) -> Option<AMQPValue> {
    Some(match value {
        Value::Null => AMQPValue::Void,
        Value::Bool(b) => AMQPValue::Boolean(*b),
        Value::Ubyte(n) => AMQPValue::ShortShortUInt(*n),
        Value::Ushort(n) => AMQPValue::ShortUInt(*n),
        Value::Uint(n) => AMQPValue::LongUInt(*n),
        Value::Ulong(n) => AMQPValue::LongLongInt(*n as i64),
        Value::Byte(n) => AMQPValue::ShortShortInt(*n),
        Value::Short(n) => AMQPValue::ShortInt(*n),
        Value::Int(n) => AMQPValue::LongInt(*n),
        Value::Long(n) => AMQPValue::LongLongInt(*n),
        Value::Float(f) => AMQPValue::Float(f.into_inner()),
        Value::Double(d) => AMQPValue::Double(d.into_inner()),
        Value::Timestamp(t) => AMQPValue::Timestamp(t.milliseconds().div_euclid(1000) as u64),
        Value::Binary(b) => match binary {
            BinaryHeaders::ByteArray => AMQPValue::ByteArray(ByteArray::from(b.to_vec())),
            BinaryHeaders::LongString => AMQPValue::LongString(LongString::from(b.to_vec())),
        },
        Value::String(s) => AMQPValue::LongString(LongString::from(s.as_bytes())),
        Value::Symbol(s) => AMQPValue::LongString(LongString::from(s.as_str().as_bytes())),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fe2o3_amqp_types::messaging::message::__private::Serializable;
    use fe2o3_amqp_types::messaging::{
        ApplicationProperties, Data, Header, MessageAnnotations, Properties,
    };
    use fe2o3_amqp_types::primitives::{Binary, Symbol, Timestamp, Uuid};

    /// The AMQP 1.0 encoding of `message`, as a stream stores it.
    fn encoded<B: fe2o3_amqp_types::messaging::SerializableBody>(message: Message<B>) -> Vec<u8> {
        serde_amqp::to_vec(&Serializable(message)).expect("encodes")
    }

    /// The properties and body of a message with these properties, read back.
    fn with_properties(section: Properties, binary: BinaryHeaders) -> BasicProperties {
        let bytes = encoded(
            Message::builder()
                .properties(section)
                .data(b"{}".to_vec())
                .build(),
        );
        let (properties, body) = amqp_091_of(&bytes, binary).expect("converts");
        assert_eq!(body, b"{}");
        properties
    }

    /// The header `name` of `properties`.
    fn header(properties: &BasicProperties, name: &str) -> Option<AMQPValue> {
        properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(name).cloned())
    }

    #[test]
    fn ids_of_each_kind_go_where_the_broker_puts_them() {
        let id = |id: MessageId| {
            with_properties(
                Properties::builder()
                    .message_id(id.clone())
                    .correlation_id(id)
                    .build(),
                BinaryHeaders::ByteArray,
            )
        };
        let p = id(MessageId::String("m-\"1\" \u{1f600}".into()));
        assert_eq!(
            p.message_id().as_ref().map(|s| s.as_str()),
            Some("m-\"1\" \u{1f600}")
        );
        assert_eq!(
            p.correlation_id().as_ref().map(|s| s.as_str()),
            Some("m-\"1\" \u{1f600}")
        );
        let p = id(MessageId::Ulong(7));
        assert_eq!(p.message_id().as_ref().map(|s| s.as_str()), Some("7"));
        let uuid = Uuid::from([
            0x67, 0xe5, 0x50, 0x44, 0x10, 0xb1, 0x42, 0x6f, 0x92, 0x47, 0xbb, 0x68, 0x0e, 0x5f,
            0xe0, 0xc8,
        ]);
        let p = id(MessageId::Uuid(uuid));
        assert_eq!(
            p.message_id().as_ref().map(|s| s.as_str()),
            Some("urn:uuid:67e55044-10b1-426f-9247-bb680e5fe0c8")
        );
        let p = id(MessageId::Binary(Binary::from(vec![1u8, 2])));
        assert_eq!(*p.message_id(), None);
        assert_eq!(
            header(&p, "x-message-id"),
            Some(AMQPValue::ByteArray(vec![1u8, 2].into()))
        );
        assert_eq!(
            header(&p, "x-correlation-id"),
            Some(AMQPValue::ByteArray(vec![1u8, 2].into()))
        );
        let long = "x".repeat(300);
        let p = id(MessageId::String(long.clone()));
        assert_eq!(*p.message_id(), None);
        assert_eq!(
            header(&p, "x-message-id"),
            Some(AMQPValue::LongString(long.into()))
        );
    }

    #[test]
    fn timestamps_are_read_in_milliseconds_and_given_in_seconds() {
        let p = with_properties(
            Properties::builder()
                .creation_time(Timestamp::from_milliseconds(1_700_000_002_500))
                .content_type(Symbol::from("application/json"))
                .reply_to("/queues/replies")
                .group_id(String::from("shop"))
                .user_id(Binary::from(b"guest".to_vec()))
                .build(),
            BinaryHeaders::LongString,
        );
        assert_eq!(*p.timestamp(), Some(1_700_000_002));
        assert_eq!(
            p.content_type().as_ref().map(|s| s.as_str()),
            Some("application/json")
        );
        assert_eq!(p.reply_to().as_ref().map(|s| s.as_str()), Some("replies"));
        assert_eq!(p.app_id().as_ref().map(|s| s.as_str()), Some("shop"));
        assert_eq!(p.user_id().as_ref().map(|s| s.as_str()), Some("guest"));
    }

    /// A message as 3.10 stores one published over AMQP 0-9-1 (`x-basic-*`
    /// annotations and application properties, no header section) or as 4.x
    /// does (a header section, `x-` headers as annotations).
    fn stored(binary: BinaryHeaders) -> Vec<u8> {
        let application = ApplicationProperties::builder()
            .insert("x-error", "db down")
            .insert("x-retry-count", 3i64)
            .insert("ratio", 0.1f64)
            .insert("half", -1.5f32)
            .insert("ok", true)
            .insert("at", Timestamp::from_milliseconds(1_700_000_002_999))
            .insert("raw", SimpleValue::Binary(Binary::from(vec![0u8, 255])))
            .insert("x-basic-app-id", "shop")
            .insert("x-basic-type", "order")
            .build();
        let builder = Message::builder().application_properties(application);
        match binary {
            BinaryHeaders::ByteArray => encoded(
                builder
                    .message_annotations(
                        MessageAnnotations::builder()
                            .insert(Symbol::from("x-basic-delivery-mode"), Value::Ubyte(2))
                            .insert(Symbol::from("x-basic-priority"), Value::Ubyte(5))
                            .insert(
                                Symbol::from("x-basic-expiration"),
                                Value::String("60000".into()),
                            )
                            .insert(Symbol::from("x-routing-key"), Value::String("rk".into()))
                            .build(),
                    )
                    .data(b"body".to_vec())
                    .build(),
            ),
            BinaryHeaders::LongString => encoded(
                builder
                    .header(
                        Header::builder()
                            .durable(true)
                            .priority(5)
                            .ttl(60000)
                            .build(),
                    )
                    .message_annotations(
                        MessageAnnotations::builder()
                            .insert(
                                Symbol::from("x-first-death-queue"),
                                Value::String("q".into()),
                            )
                            .insert(Symbol::from("x-cc"), Value::String("other".into()))
                            .insert(Symbol::from("x-exchange"), Value::String("ex".into()))
                            .build(),
                    )
                    .data_batch(vec![
                        Data(Binary::from(b"bo".to_vec())),
                        Data(Binary::from(b"dy".to_vec())),
                    ])
                    .build(),
            ),
        }
    }

    #[test]
    fn headers_of_simple_values_come_back_as_the_broker_gives_them() {
        for binary in [BinaryHeaders::ByteArray, BinaryHeaders::LongString] {
            let (p, body) = amqp_091_of(&stored(binary), binary).expect("converts");
            assert_eq!(body, b"body");
            assert_eq!(*p.delivery_mode(), Some(2));
            assert_eq!(*p.priority(), Some(5));
            assert_eq!(p.expiration().as_ref().map(|s| s.as_str()), Some("60000"));
            assert_eq!(p.kind().as_ref().map(|s| s.as_str()), Some("order"));
            assert_eq!(p.app_id().as_ref().map(|s| s.as_str()), Some("shop"));
            assert_eq!(
                header(&p, "x-error"),
                Some(AMQPValue::LongString("db down".into()))
            );
            assert_eq!(header(&p, "x-retry-count"), Some(AMQPValue::LongLongInt(3)));
            assert_eq!(header(&p, "ratio"), Some(AMQPValue::Double(0.1)));
            assert_eq!(header(&p, "half"), Some(AMQPValue::Float(-1.5)));
            assert_eq!(header(&p, "ok"), Some(AMQPValue::Boolean(true)));
            assert_eq!(header(&p, "at"), Some(AMQPValue::Timestamp(1_700_000_002)));
            assert_eq!(header(&p, "x-basic-type"), None);
            assert_eq!(header(&p, "x-routing-key"), None);
            assert_eq!(header(&p, "x-exchange"), None);
            let raw = match binary {
                BinaryHeaders::ByteArray => AMQPValue::ByteArray(vec![0u8, 255].into()),
                BinaryHeaders::LongString => AMQPValue::LongString(vec![0u8, 255].into()),
            };
            assert_eq!(header(&p, "raw"), Some(raw));
            if binary == BinaryHeaders::LongString {
                assert_eq!(
                    header(&p, "x-first-death-queue"),
                    Some(AMQPValue::LongString("q".into()))
                );
                assert_eq!(
                    header(&p, "CC"),
                    Some(AMQPValue::LongString("other".into()))
                );
            }
        }
    }

    #[test]
    fn a_header_without_a_priority_gives_none_back() {
        let bytes = encoded(
            Message::builder()
                .header(Header::builder().durable(true).build())
                .data(b"{}".to_vec())
                .build(),
        );
        let (p, _) = amqp_091_of(&bytes, BinaryHeaders::LongString).expect("converts");
        assert_eq!(*p.delivery_mode(), Some(2));
        assert_eq!(*p.priority(), None);
        assert_eq!(*p.expiration(), None);
    }

    #[test]
    fn collections_and_other_bodies_are_refused() {
        let deaths = encoded(
            Message::builder()
                .message_annotations(
                    MessageAnnotations::builder()
                        .insert(Symbol::from("x-opt-deaths"), Value::List(vec![]))
                        .build(),
                )
                .data(b"{}".to_vec())
                .build(),
        );
        assert_eq!(
            amqp_091_of(&deaths, BinaryHeaders::LongString).unwrap_err(),
            Unconvertible::Collection("x-opt-deaths".into())
        );
        let table = encoded(
            Message::builder()
                .message_annotations(
                    MessageAnnotations::builder()
                        .insert(Symbol::from("x-custom"), Value::Map(Default::default()))
                        .build(),
                )
                .data(b"{}".to_vec())
                .build(),
        );
        assert_eq!(
            amqp_091_of(&table, BinaryHeaders::LongString).unwrap_err(),
            Unconvertible::Collection("x-custom".into())
        );
        let value = encoded(Message::builder().value("text").build());
        assert_eq!(
            amqp_091_of(&value, BinaryHeaders::LongString).unwrap_err(),
            Unconvertible::Body
        );
        assert!(matches!(
            amqp_091_of(b"\x00\x53", BinaryHeaders::LongString),
            Err(Unconvertible::Undecodable(_))
        ));
        // A message of no body section: its properties alone.
        let empty =
            serde_amqp::to_vec(&Properties::builder().message_id(1u64).build()).expect("encodes");
        let (_, body) = amqp_091_of(&empty, BinaryHeaders::LongString).expect("converts");
        assert!(body.is_empty());
    }
}
