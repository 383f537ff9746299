//! An AMQP 1.0 message as the transport's [`Delivery`]: its body's bytes,
//! its properties, application properties and `x-` message annotations as
//! AMQP 0-9-1 properties and headers. Total: whatever the message holds,
//! the result is a delivery the consumer can settle.

use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{Body, Message, MessageId};
use fe2o3_amqp::types::primitives::{LazyValue, Value};
use lapin::BasicProperties;
use lapin::types::{FieldTable, ShortString};

use super::values::{field_value, simple_field_value, uuid_text};
use crate::transport::acker::Acker;
use crate::transport::delivery::Delivery;

/// The body a link receives: any, its values left encoded until read.
pub(crate) type AnyBody = Body<LazyValue>;

/// The message a link receives.
pub(crate) type Received = Message<AnyBody>;

/// The annotation RabbitMQ puts the exchange a message was published to in.
const EXCHANGE: &str = "x-exchange";
/// The annotation RabbitMQ puts the message's routing key in.
const ROUTING_KEY: &str = "x-routing-key";

/// `message` as a delivery settled through `acker`.
pub(crate) fn delivery(message: Received, acker: Acker) -> Delivery {
    let mut headers = FieldTable::default();
    let mut exchange = String::new();
    let mut routing_key = String::new();
    if let Some(application) = &message.application_properties {
        for (key, value) in application.0.iter() {
            if let (Ok(key), Some(value)) = (
                ShortString::try_new(key.as_str()),
                simple_field_value(value),
            ) {
                headers.insert(key, value);
            }
        }
    }
    if let Some(annotations) = &message.message_annotations {
        for (key, value) in annotations.0.iter() {
            let OwnedKey::Symbol(key) = key else { continue };
            let key = key.as_str();
            if !key.starts_with("x-") {
                continue;
            }
            match key {
                EXCHANGE => exchange = text_of(value).unwrap_or_default(),
                ROUTING_KEY => routing_key = text_of(value).unwrap_or_default(),
                _ => {}
            }
            if let (Ok(key), Some(value)) = (ShortString::try_new(key), field_value(value)) {
                headers.insert(key, value);
            }
        }
    }

    let mut properties = BasicProperties::default();
    let mut redelivered = false;
    if let Some(header) = &message.header {
        // Returned before: counted as failed (`delivery-count`), or
        // released (RabbitMQ then no longer marks it `first-acquirer`).
        redelivered = header.delivery_count > 0 || !header.first_acquirer;
        properties = properties
            .with_delivery_mode(if header.durable { 2 } else { 1 })
            .with_priority(header.priority.0);
        if let Some(ttl) = header.ttl
            && let Ok(ttl) = ShortString::try_new(ttl.to_string())
        {
            properties = properties.with_expiration(ttl);
        }
    }
    if let Some(p) = &message.properties {
        if let Some(id) = p.message_id.as_ref().and_then(id_text) {
            properties = properties.with_message_id(id);
        }
        if let Some(id) = p.correlation_id.as_ref().and_then(id_text) {
            properties = properties.with_correlation_id(id);
        }
        if let Some(Ok(content_type)) = p
            .content_type
            .as_ref()
            .map(|s| ShortString::try_new(s.as_str()))
        {
            properties = properties.with_content_type(content_type);
        }
        if let Some(Ok(encoding)) = p
            .content_encoding
            .as_ref()
            .map(|s| ShortString::try_new(s.as_str()))
        {
            properties = properties.with_content_encoding(encoding);
        }
        if let Some(created) = &p.creation_time {
            properties = properties.with_timestamp(
                u64::try_from(created.milliseconds().div_euclid(1000)).unwrap_or(0),
            );
        }
        if let Some(Ok(reply_to)) = p
            .reply_to
            .as_ref()
            .map(|s| ShortString::try_new(s.as_str()))
        {
            properties = properties.with_reply_to(reply_to);
        }
    }
    if !headers.inner().is_empty() {
        properties = properties.with_headers(headers);
    }
    Delivery::new(body(message.body), acker)
        .with_route(exchange, routing_key)
        .with_properties(properties)
        .with_redelivered(redelivered)
}

/// A string or symbol's text.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Symbol(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

/// A message id as text: a string as it is, a number or a UUID as its
/// text, binary as UTF-8 when it is, as hex otherwise; `None` beyond 255
/// bytes (AMQP 0-9-1's limit).
fn id_text(id: &MessageId) -> Option<ShortString> {
    let text = match id {
        MessageId::String(s) => s.clone(),
        MessageId::Ulong(n) => n.to_string(),
        MessageId::Uuid(u) => uuid_text(u.as_inner()),
        MessageId::Binary(b) => match std::str::from_utf8(b.as_slice()) {
            Ok(s) => s.to_owned(),
            Err(_) => b.iter().map(|byte| format!("{byte:02x}")).collect(),
        },
    };
    ShortString::try_new(text).ok()
}

/// AMQP 1.0's section descriptors (`amqp:amqp-sequence:list`,
/// `amqp:amqp-value:*`) as encoded: a described type with a small ulong.
const SEQUENCE_SECTION: [u8; 3] = [0x00, 0x53, 0x76];
const VALUE_SECTION: [u8; 3] = [0x00, 0x53, 0x77];

/// The body's bytes: the data sections' bytes one after the other (what
/// AMQP 0-9-1 publishes arrives as one); an amqp-value string or binary:
/// its bytes; any other amqp-value or amqp-sequence body: the AMQP 1.0
/// encoding of its sections.
pub(crate) fn body(body: Body<LazyValue>) -> Vec<u8> {
    match body {
        Body::Data(_) => match body.try_into_data() {
            Ok(sections) => sections.fold(Vec::new(), |mut bytes, section| {
                bytes.extend_from_slice(section.as_slice());
                bytes
            }),
            Err(_) => Vec::new(),
        },
        Body::Value(_) => match body.try_into_value() {
            Ok(value) => value_bytes(value.as_slice()),
            Err(_) => Vec::new(),
        },
        Body::Sequence(_) => match body.try_into_sequence() {
            Ok(sections) => sections.fold(Vec::new(), |mut bytes, items| {
                bytes.extend_from_slice(&SEQUENCE_SECTION);
                list(&mut bytes, &items);
                bytes
            }),
            Err(_) => Vec::new(),
        },
        Body::Empty => Vec::new(),
    }
}

/// An encoded amqp-value's bytes when it is a string or binary, its
/// section's encoding otherwise.
fn value_bytes(encoded: &[u8]) -> Vec<u8> {
    let payload = match encoded.split_first() {
        // str8-utf8, vbin8: one byte of length.
        Some((0xa1 | 0xa0, rest)) => rest
            .split_first()
            .and_then(|(&len, rest)| rest.get(..usize::from(len))),
        // str32-utf8, vbin32: four bytes of length.
        Some((0xb1 | 0xb0, rest)) => rest.get(..4).and_then(|len| {
            let len = u32::from_be_bytes(len.try_into().ok()?);
            rest.get(4..)?.get(..usize::try_from(len).ok()?)
        }),
        _ => None,
    };
    match payload {
        Some(payload) => payload.to_vec(),
        None => {
            let mut bytes = VALUE_SECTION.to_vec();
            bytes.extend_from_slice(encoded);
            bytes
        }
    }
}

/// Appends `items` (each already encoded) as a list32.
fn list(bytes: &mut Vec<u8>, items: &[LazyValue]) {
    let size: usize = 4 + items.iter().map(|i| i.as_slice().len()).sum::<usize>();
    bytes.push(0xd0);
    bytes.extend_from_slice(&u32::try_from(size).unwrap_or(u32::MAX).to_be_bytes());
    bytes.extend_from_slice(&u32::try_from(items.len()).unwrap_or(u32::MAX).to_be_bytes());
    for item in items {
        bytes.extend_from_slice(item.as_slice());
    }
}

#[cfg(test)]
mod tests {
    use fe2o3_amqp::types::messaging::annotations::Annotations;
    use fe2o3_amqp::types::messaging::{
        ApplicationProperties, Data, Header, MessageAnnotations, Properties,
    };
    use fe2o3_amqp::types::primitives::{OrderedMap, SimpleValue, Symbol, Timestamp};
    use futures_util::future::BoxFuture;
    use lapin::types::AMQPValue;

    use super::*;
    use crate::transport::acker::Settle;
    use crate::transport::transport_error::TransportError;

    struct Unsettled;
    impl Settle for Unsettled {
        fn delivery_tag(&self) -> u64 {
            1
        }
        fn ack(&self, _: bool) -> BoxFuture<'_, Result<(), TransportError>> {
            Box::pin(async { Ok(()) })
        }
        fn nack(&self, _: bool) -> BoxFuture<'_, Result<(), TransportError>> {
            Box::pin(async { Ok(()) })
        }
        fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>> {
            Box::pin(async { Ok(()) })
        }
    }

    fn message(body: AnyBody) -> Received {
        Message {
            header: None,
            delivery_annotations: None,
            message_annotations: None,
            properties: None,
            application_properties: None,
            body,
            footer: None,
        }
    }

    fn header<'a>(delivery: &'a Delivery, key: &str) -> Option<&'a AMQPValue> {
        delivery.properties.headers().as_ref()?.inner().get(key)
    }

    #[test]
    fn data_sections_are_the_body_one_after_the_other() {
        let body =
            Body::Data(vec![Data(b"ab".to_vec().into()), Data(b"cd".to_vec().into())].into());
        let delivery = delivery(message(body), Acker::new(Unsettled));
        assert_eq!(delivery.data, b"abcd");
        assert!(!delivery.redelivered);
        assert_eq!(delivery.properties.headers(), &None);
        assert_eq!(delivery.exchange, "");
        let empty = super::delivery(message(Body::Empty), Acker::new(Unsettled));
        assert!(empty.data.is_empty());
    }

    #[test]
    fn an_amqp_value_string_or_binary_is_its_bytes_anything_else_its_encoding() {
        assert_eq!(value_bytes(&[0xa1, 3, b'a', b'b', b'c']), b"abc");
        assert_eq!(value_bytes(&[0xb0, 0, 0, 0, 2, 1, 2]), [1, 2]);
        // An int, and a string whose length says more than there is.
        assert_eq!(value_bytes(&[0x54, 7]), [0x00, 0x53, 0x77, 0x54, 7]);
        assert_eq!(
            value_bytes(&[0xa1, 9, b'a']),
            [0x00, 0x53, 0x77, 0xa1, 9, b'a']
        );
        assert_eq!(value_bytes(&[]), [0x00, 0x53, 0x77]);
        let mut bytes = Vec::new();
        list(&mut bytes, &[]);
        assert_eq!(bytes, [0xd0, 0, 0, 0, 4, 0, 0, 0, 0]);
    }

    #[test]
    fn properties_application_properties_and_x_annotations_arrive() {
        let mut received = message(Body::Empty);
        received.header = Some(Header {
            durable: true,
            delivery_count: 2,
            ..Header::default()
        });
        received.properties = Some(Properties {
            message_id: Some(MessageId::Ulong(42)),
            correlation_id: Some(MessageId::Binary(vec![0xff, 0x01].into())),
            content_type: Some(Symbol::from("application/json")),
            content_encoding: Some(Symbol::from("gzip")),
            creation_time: Some(Timestamp::from_milliseconds(1_700_000_000_999)),
            ..Properties::default()
        });
        let mut application = OrderedMap::new();
        application.insert("tenant".to_owned(), SimpleValue::String("eu".into()));
        application.insert("attempt".to_owned(), SimpleValue::Int(3));
        received.application_properties = Some(ApplicationProperties(application));
        let mut annotations = Annotations::new();
        annotations.insert(
            OwnedKey::Symbol(Symbol::from("x-exchange")),
            Value::String("orders".into()),
        );
        annotations.insert(
            OwnedKey::Symbol(Symbol::from("x-routing-key")),
            Value::String("orders.eu".into()),
        );
        annotations.insert(
            OwnedKey::Symbol(Symbol::from("x-delivery-count")),
            Value::Long(2),
        );
        annotations.insert(
            OwnedKey::Symbol(Symbol::from("x-opt-nested")),
            Value::List(vec![
                Value::Map(OrderedMap::new()),
                Value::Decimal64([0; 8].into()),
            ]),
        );
        // Not `x-`, and a numeric key: not headers.
        annotations.insert(OwnedKey::Symbol(Symbol::from("other")), Value::Long(1));
        annotations.insert(OwnedKey::Ulong(7), Value::Long(1));
        received.message_annotations = Some(MessageAnnotations(annotations));

        let delivery = delivery(received, Acker::new(Unsettled));
        assert!(delivery.redelivered);
        assert_eq!(delivery.exchange, "orders");
        assert_eq!(delivery.routing_key, "orders.eu");
        let p = &delivery.properties;
        assert_eq!(p.message_id().as_ref().map(|s| s.as_str()), Some("42"));
        assert_eq!(
            p.correlation_id().as_ref().map(|s| s.as_str()),
            Some("ff01")
        );
        assert_eq!(
            p.content_type().as_ref().map(|s| s.as_str()),
            Some("application/json")
        );
        assert_eq!(
            p.content_encoding().as_ref().map(|s| s.as_str()),
            Some("gzip")
        );
        assert_eq!(p.timestamp(), &Some(1_700_000_000));
        assert_eq!(p.delivery_mode(), &Some(2));
        assert_eq!(
            header(&delivery, "tenant"),
            Some(&AMQPValue::LongString("eu".into()))
        );
        assert_eq!(
            header(&delivery, "attempt"),
            Some(&AMQPValue::LongLongInt(3))
        );
        assert_eq!(
            header(&delivery, "x-delivery-count"),
            Some(&AMQPValue::LongLongInt(2))
        );
        assert_eq!(
            header(&delivery, "x-opt-nested"),
            Some(&AMQPValue::FieldArray(
                vec![AMQPValue::FieldTable(FieldTable::default())].into()
            ))
        );
        assert_eq!(header(&delivery, "other"), None);
        assert_eq!(p.headers().as_ref().map(|h| h.inner().len()), Some(6));
    }

    #[test]
    fn redelivered_when_counted_or_no_longer_the_first_acquirer() {
        let with = |header: Header| {
            let mut received = message(Body::Empty);
            received.header = Some(header);
            delivery(received, Acker::new(Unsettled)).redelivered
        };
        let first = Header {
            first_acquirer: true,
            ..Header::default()
        };
        assert!(!with(first.clone()));
        assert!(with(Header {
            delivery_count: 1,
            ..first
        }));
        assert!(with(Header::default()), "released: not the first acquirer");
    }
}
