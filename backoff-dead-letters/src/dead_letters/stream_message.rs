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
//! The protocol crate's message model names no type for lists and maps, nor
//! for ids, and gives no accessor for timestamps and floats: those are read
//! from its `Debug` text (exactly: the text of a float or a date round-trips),
//! and a message with a list or map that the broker would give back (a
//! custom `x-` header holding an array or a table; 4.x's `x-opt-deaths`) is
//! [`Unconvertible`], so that its range is read over AMQP instead.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, ByteArray, FieldTable, LongString, ShortString};
use rabbitmq_stream_protocol::message::{AnnonationKey, Message, SimpleValue, Value};

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
    /// Its body is not one data section (an AMQP value or sequence, which
    /// no AMQP 0-9-1 publisher writes).
    #[error("its body is not a data section")]
    Body,
    /// An annotation the broker gives back holds a list or a map.
    #[error("its annotation '{0}' holds a list or a map")]
    Collection(String),
    /// A value whose text could not be read back.
    #[error("its {0} could not be read")]
    Unreadable(&'static str),
}

/// The AMQP 0-9-1 properties and body of `message`, as the broker delivers
/// them over AMQP (less the `x-stream-offset` header it adds).
pub(crate) fn amqp_091_of(
    message: &Message,
    binary: BinaryHeaders,
) -> Result<(BasicProperties, Vec<u8>), Unconvertible> {
    let mut properties = BasicProperties::default();
    let mut headers = FieldTable::default();
    let annotation = |name: &str| {
        message.message_annotations().and_then(|annotations| {
            annotations.iter().find_map(|(key, value)| match key {
                AnnonationKey::Symbol(symbol) if symbol.as_str() == name => Some(value),
                _ => None,
            })
        })
    };
    if let Some(section) = message.properties() {
        if let Some(id) = &section.message_id {
            match message_id(&format!("{id:?}")).ok_or(Unconvertible::Unreadable("message-id"))? {
                Id::Property(id) => properties = properties.with_message_id(id),
                Id::Header(value) => {
                    headers.insert("x-message-id".into(), value);
                }
            }
        }
        if let Some(id) = &section.correlation_id {
            match message_id(&format!("{id:?}"))
                .ok_or(Unconvertible::Unreadable("correlation-id"))?
            {
                Id::Property(id) => properties = properties.with_correlation_id(id),
                Id::Header(value) => {
                    headers.insert("x-correlation-id".into(), value);
                }
            }
        }
        if let Some(at) = &section.creation_time {
            let at =
                millis(&format!("{at:?}")).ok_or(Unconvertible::Unreadable("creation-time"))?;
            properties = properties.with_timestamp(at.div_euclid(1000) as u64);
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
    match message.header() {
        Some(header) => {
            properties = properties
                .with_delivery_mode(if header.durable { 2 } else { 1 })
                .with_priority(header.priority);
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
    let application = message.application_properties();
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
            if let Some(value) = simple(value, binary)? {
                headers.insert(name.as_str().into(), value);
            }
        }
    }
    if let Some(annotations) = message.message_annotations() {
        for (key, value) in annotations.iter() {
            let AnnonationKey::Symbol(name) = key else {
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
                Value::Simple(value) => {
                    if let Some(value) = simple(value, binary)? {
                        headers.insert(name.into(), value);
                    }
                }
                Value::Collection(_) => return Err(Unconvertible::Collection(name.to_owned())),
                Value::Described(_) => {}
            }
        }
    }
    if !headers.inner().is_empty() {
        properties = properties.with_headers(headers);
    }
    let body = match message.data() {
        Some(data) => data.to_vec(),
        None if !matches!(message.value_ref::<&String>(), Ok(None)) => {
            return Err(Unconvertible::Body);
        }
        None => Vec::new(),
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

/// An id, from its text: `String("m-1")`, `ULong(7)`, `Long(-7)`,
/// `Uuid(67e55044-10b1-426f-9247-bb680e5fe0c8)`, `Binary([1, 2])`.
fn message_id(shown: &str) -> Option<Id> {
    let (kind, inner) = shown.strip_suffix(')')?.split_once('(')?;
    Some(match kind {
        "String" => {
            let s = unescape(inner.strip_prefix('"')?.strip_suffix('"')?)?;
            if s.len() <= 255 {
                Id::Property(short(&s))
            } else {
                Id::Header(AMQPValue::LongString(LongString::from(s.into_bytes())))
            }
        }
        "ULong" | "Long" => Id::Property(short(&inner.parse::<i128>().ok()?.to_string())),
        "Uuid" => Id::Property(short(&format!("urn:uuid:{inner}"))),
        "Binary" => {
            let list = inner.strip_prefix('[')?.strip_suffix(']')?;
            let bytes = list
                .split(',')
                .map(str::trim)
                .filter(|b| !b.is_empty())
                .map(|b| b.parse::<u8>().ok())
                .collect::<Option<Vec<u8>>>()?;
            Id::Header(AMQPValue::ByteArray(ByteArray::from(bytes)))
        }
        _ => return None,
    })
}

/// The string whose `Debug` text (without its quotes) is `shown`.
fn unescape(shown: &str) -> Option<String> {
    let mut out = String::with_capacity(shown.len());
    let mut chars = shown.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '0' => '\0',
            '\\' => '\\',
            '"' => '"',
            '\'' => '\'',
            'u' => {
                let rest = chars.as_str().strip_prefix('{')?;
                let (hex, after) = rest.split_once('}')?;
                chars = after.chars();
                char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
            }
            _ => return None,
        });
    }
    Some(out)
}

fn short(s: &str) -> ShortString {
    ShortString::from(s)
}

fn text(value: &Value) -> Option<&str> {
    match value {
        Value::Simple(SimpleValue::String(s)) => Some(s),
        Value::Simple(SimpleValue::Symbol(s)) => Some(s.as_str()),
        _ => None,
    }
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Simple(simple) => match simple {
            SimpleValue::Ubyte(n) => Some(i64::from(*n)),
            SimpleValue::Ushort(n) => Some(i64::from(*n)),
            SimpleValue::Uint(n) => Some(i64::from(*n)),
            SimpleValue::Ulong(n) => i64::try_from(*n).ok(),
            SimpleValue::Byte(n) => Some(i64::from(*n)),
            SimpleValue::Short(n) => Some(i64::from(*n)),
            SimpleValue::Int(n) => Some(i64::from(*n)),
            SimpleValue::Long(n) => Some(*n),
            _ => None,
        },
        _ => None,
    }
}

/// The header value of a simple AMQP 1.0 value, as the broker gives it
/// back (none for a char or a UUID, which it does not).
fn simple(value: &SimpleValue, binary: BinaryHeaders) -> Result<Option<AMQPValue>, Unconvertible> {
    Ok(Some(match value {
        SimpleValue::Null => AMQPValue::Void,
        SimpleValue::Boolean(b) => AMQPValue::Boolean(*b),
        SimpleValue::Ubyte(n) => AMQPValue::ShortShortUInt(*n),
        SimpleValue::Ushort(n) => AMQPValue::ShortUInt(*n),
        SimpleValue::Uint(n) => AMQPValue::LongUInt(*n),
        SimpleValue::Ulong(n) => AMQPValue::LongLongInt(*n as i64),
        SimpleValue::Byte(n) => AMQPValue::ShortShortInt(*n),
        SimpleValue::Short(n) => AMQPValue::ShortInt(*n),
        SimpleValue::Int(n) => AMQPValue::LongInt(*n),
        SimpleValue::Long(n) => AMQPValue::LongLongInt(*n),
        SimpleValue::Float(f) => AMQPValue::Float(
            float(&format!("{f:?}")).ok_or(Unconvertible::Unreadable("float"))? as f32,
        ),
        SimpleValue::Double(d) => {
            AMQPValue::Double(float(&format!("{d:?}")).ok_or(Unconvertible::Unreadable("double"))?)
        }
        SimpleValue::Timestamp(t) => AMQPValue::Timestamp(
            millis(&format!("{t:?}"))
                .ok_or(Unconvertible::Unreadable("timestamp"))?
                .div_euclid(1000) as u64,
        ),
        SimpleValue::Binary(b) => match binary {
            BinaryHeaders::ByteArray => AMQPValue::ByteArray(ByteArray::from(b.clone())),
            BinaryHeaders::LongString => AMQPValue::LongString(LongString::from(b.clone())),
        },
        SimpleValue::String(s) => AMQPValue::LongString(LongString::from(s.as_bytes())),
        SimpleValue::Symbol(s) => AMQPValue::LongString(LongString::from(s.as_str().as_bytes())),
        SimpleValue::Char(_) | SimpleValue::Uuid(_) => return Ok(None),
    }))
}

/// The number in the text of a float or a double: `Double(1.5)`.
fn float(shown: &str) -> Option<f64> {
    shown
        .strip_suffix(')')?
        .split_once('(')?
        .1
        .trim()
        .parse()
        .ok()
}

/// The milliseconds since the epoch of a timestamp, from its text:
/// `Timestamp(2023-11-14T22:13:22.500Z)`.
fn millis(shown: &str) -> Option<i64> {
    let inner = shown.strip_prefix("Timestamp(")?.strip_suffix(')')?;
    chrono::DateTime::parse_from_rfc3339(inner)
        .ok()
        .map(|at| at.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_timestamps_and_floats_are_read_from_their_text() {
        assert_eq!(
            message_id(r#"String("m-1")"#),
            Some(Id::Property("m-1".into()))
        );
        assert_eq!(
            message_id(r#"String("a \"b\" \\ \u{1f600}\n")"#),
            Some(Id::Property("a \"b\" \\ \u{1f600}\n".into()))
        );
        assert_eq!(message_id("ULong(7)"), Some(Id::Property("7".into())));
        assert_eq!(
            message_id("Binary([1, 2])"),
            Some(Id::Header(AMQPValue::ByteArray(vec![1u8, 2].into())))
        );
        assert_eq!(
            millis("Timestamp(2023-11-14T22:13:22Z)"),
            Some(1_700_000_002_000)
        );
        assert_eq!(
            millis("Timestamp(2023-11-14T22:13:22.500Z)"),
            Some(1_700_000_002_500)
        );
        assert_eq!(float("Double(1.5)"), Some(1.5));
        assert_eq!(float("Float(-0.1)"), Some(-0.1));
    }

    #[test]
    fn the_protocol_crate_shows_its_values_as_read_here() {
        use rabbitmq_stream_protocol::message::Message;
        let at = chrono::DateTime::from_timestamp_millis(1_700_000_002_500).expect("a date");
        let message = Message::builder()
            .properties()
            .message_id(String::from("m-\"1\""))
            .creation_time(at)
            .message_builder()
            .application_properties()
            .insert("x-error", "db down")
            .insert("x-retry-count", 3i64)
            .message_builder()
            .body(b"{}".to_vec())
            .build();
        let (properties, body) =
            amqp_091_of(&message, BinaryHeaders::LongString).expect("converts");
        assert_eq!(body, b"{}");
        assert_eq!(
            properties.message_id().as_ref().map(|s| s.as_str()),
            Some("m-\"1\"")
        );
        assert_eq!(*properties.timestamp(), Some(1_700_000_002));
        let headers = properties.headers().clone().expect("headers");
        assert_eq!(
            headers.inner().get("x-retry-count"),
            Some(&AMQPValue::LongLongInt(3))
        );
        assert_eq!(
            headers.inner().get("x-error"),
            Some(&AMQPValue::LongString("db down".into()))
        );
    }
}
