//! Conversions between the core's view of header and argument values and
//! lapin's AMQP values: the wire data model every layer shares.

use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use rabbit_backoff_core::{Argument, HeaderValue};

use super::transport_error::TransportError;

/// The core's view of an AMQP value: integers of every width as one integer,
/// strings and UTF-8 byte arrays as text, other bytes as bytes, and the
/// types the framework never reads by their names. The runtime reads
/// headers such as `x-retry-count` through it, and so does any
/// [`Transport`](crate::transport::transport::Transport) that wants to read them the
/// same way.
///
/// ```
/// use rabbit_backoff::rules::HeaderValue;
/// use rabbit_backoff::lapin::types::{AMQPValue, LongString};
/// use rabbit_backoff::transport::header_view;
///
/// assert_eq!(header_view(&AMQPValue::ShortUInt(3)), HeaderValue::Int(3));
/// let text = AMQPValue::LongString(LongString::from("3"));
/// assert_eq!(header_view(&text), HeaderValue::Str("3"));
/// ```
pub fn header_view(value: &AMQPValue) -> HeaderValue<'_> {
    match value {
        AMQPValue::ShortShortInt(v) => HeaderValue::Int((*v).into()),
        AMQPValue::ShortShortUInt(v) => HeaderValue::Int((*v).into()),
        AMQPValue::ShortInt(v) => HeaderValue::Int((*v).into()),
        AMQPValue::ShortUInt(v) => HeaderValue::Int((*v).into()),
        AMQPValue::LongInt(v) => HeaderValue::Int((*v).into()),
        AMQPValue::LongUInt(v) => HeaderValue::Int((*v).into()),
        AMQPValue::LongLongInt(v) => HeaderValue::Int((*v).into()),
        AMQPValue::Float(v) => HeaderValue::Float((*v).into()),
        AMQPValue::Double(v) => HeaderValue::Float(*v),
        AMQPValue::ShortString(s) => HeaderValue::Str(s.as_str()),
        AMQPValue::LongString(s) => bytes_view(s.as_bytes()),
        AMQPValue::ByteArray(b) => bytes_view(b.as_slice()),
        AMQPValue::Boolean(b) => HeaderValue::Bool(*b),
        AMQPValue::DecimalValue(_) => HeaderValue::Other("decimal"),
        AMQPValue::FieldArray(_) => HeaderValue::Other("array"),
        AMQPValue::Timestamp(_) => HeaderValue::Other("timestamp"),
        AMQPValue::FieldTable(_) => HeaderValue::Other("table"),
        AMQPValue::Void => HeaderValue::Other("void"),
    }
}

fn bytes_view(bytes: &[u8]) -> HeaderValue<'_> {
    match std::str::from_utf8(bytes) {
        Ok(s) => HeaderValue::Str(s),
        Err(_) => HeaderValue::Bytes(bytes),
    }
}

/// The AMQP value the framework writes for a core header value.
pub(crate) fn amqp_value(value: &HeaderValue<'_>) -> AMQPValue {
    match value {
        HeaderValue::Int(n) => AMQPValue::LongLongInt(i64::try_from(*n).unwrap_or(i64::MAX)),
        HeaderValue::Float(f) => AMQPValue::Double(*f),
        HeaderValue::Str(s) => AMQPValue::LongString(LongString::from(s.as_bytes())),
        HeaderValue::Bytes(b) => AMQPValue::ByteArray(b.to_vec().into()),
        HeaderValue::Bool(b) => AMQPValue::Boolean(*b),
        HeaderValue::Other(_) => AMQPValue::Void,
        // Not reached with the core pinned exactly (`=0.1.0`);
        // `HeaderValue` is `#[non_exhaustive]` for services, so Rust wants
        // this arm: void, as `Other`.
        _ => AMQPValue::Void,
    }
}

/// `delivery_mode` of a persistent message.
pub(crate) const PERSISTENT: u8 = 2;

/// Queue arguments as an AMQP table.
pub(crate) fn arguments_table(
    arguments: &[(String, Argument)],
) -> Result<FieldTable, TransportError> {
    let mut table = FieldTable::default();
    for (key, value) in arguments {
        let value = match value {
            Argument::Int(n) => AMQPValue::LongLongInt(*n),
            Argument::Str(s) => AMQPValue::LongString(LongString::from(s.as_bytes())),
            // A value this runtime cannot write: refused rather than
            // declared as something else, which the queue would keep.
            other => {
                return Err(TransportError::Other(format!(
                    "argument {key} = {other:?}: a value type this runtime cannot write"
                )));
            }
        };
        let name = ShortString::try_new(key.as_str()).map_err(|_| {
            TransportError::Other(format!(
                "argument name is {} bytes long; AMQP allows at most 255",
                key.len()
            ))
        })?;
        table.insert(name, value);
    }
    Ok(table)
}
