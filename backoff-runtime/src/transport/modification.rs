//! [`Modification`]: how a delivery is settled as AMQP 1.0's `modified`
//! outcome, with the message annotations it sets.

use lapin::types::{AMQPValue, LongString};

/// A settlement as AMQP 1.0's `modified` outcome
/// ([`Acker::modify`](super::Acker::modify)): what RabbitMQ 4.3 holds back
/// until `x-opt-delivery-time`, or dead-letters through the queue's
/// dead-letter exchange, with the annotations given here on the message
/// from then on.
///
/// ```
/// use rabbit_backoff::transport::{AnnotationValue, Modification};
///
/// // Deliver it again in 5 s, saying why and how often it failed.
/// let retry = Modification::failed()
///     .annotate("x-opt-delivery-time", AnnotationValue::Timestamp(1_700_000_005_000))
///     .annotate("x-opt-error", AnnotationValue::String("timeout".into()))
///     .annotate("x-opt-retry-count", AnnotationValue::Uint(1));
/// assert!(retry.delivery_failed && !retry.undeliverable_here);
/// // Dead-letter it, with its reason.
/// let dead = Modification::undeliverable()
///     .annotate("x-opt-reason", AnnotationValue::String("permanent".into()));
/// assert!(dead.undeliverable_here);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Modification {
    /// The delivery failed: it counts in `x-delivery-count` (and toward a
    /// quorum queue's delivery limit).
    pub delivery_failed: bool,
    /// Not to be delivered here again: the queue dead-letters it.
    pub undeliverable_here: bool,
    /// The message annotations to set, in order. RabbitMQ keeps those whose
    /// key starts with `x-opt-`.
    pub annotations: Vec<(String, AnnotationValue)>,
}

/// The value of a message annotation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AnnotationValue {
    /// A UTF-8 string.
    String(String),
    /// An unsigned 32-bit integer.
    Uint(u32),
    /// A point in time, in milliseconds since the Unix epoch (AMQP 1.0's
    /// `timestamp`).
    Timestamp(i64),
}

impl Modification {
    /// A failed delivery to be delivered again (`delivery-failed`, not
    /// `undeliverable-here`).
    pub fn failed() -> Self {
        Modification {
            delivery_failed: true,
            undeliverable_here: false,
            annotations: Vec::new(),
        }
    }

    /// A failed delivery not to be delivered here again: its queue
    /// dead-letters it (`delivery-failed` and `undeliverable-here`).
    pub fn undeliverable() -> Self {
        Modification {
            undeliverable_here: true,
            ..Modification::failed()
        }
    }

    /// And the annotation `key` set to `value`.
    pub fn annotate(mut self, key: &str, value: AnnotationValue) -> Self {
        self.annotations.push((key.to_owned(), value));
        self
    }
}

impl AnnotationValue {
    /// The value as an AMQP 0-9-1 consumer reads it in the message's
    /// headers, as RabbitMQ converts it: a string as a long string, an
    /// unsigned integer as an unsigned 32-bit one, a timestamp in Unix
    /// seconds (a time before 1970 as 0).
    ///
    /// ```
    /// use rabbit_backoff::lapin::types::AMQPValue;
    /// use rabbit_backoff::transport::AnnotationValue;
    ///
    /// assert_eq!(AnnotationValue::Uint(3).as_header(), AMQPValue::LongUInt(3));
    /// assert_eq!(
    ///     AnnotationValue::Timestamp(1_700_000_005_999).as_header(),
    ///     AMQPValue::Timestamp(1_700_000_005),
    /// );
    /// ```
    pub fn as_header(&self) -> AMQPValue {
        match self {
            AnnotationValue::String(s) => AMQPValue::LongString(LongString::from(s.as_bytes())),
            AnnotationValue::Uint(v) => AMQPValue::LongUInt(*v),
            AnnotationValue::Timestamp(ms) => unix_ms_header(*ms),
        }
    }
}

/// AMQP 1.0's timestamp (Unix milliseconds) as AMQP 0-9-1's (Unix
/// seconds), as RabbitMQ converts it; a time before 1970 is 0.
pub(crate) fn unix_ms_header(milliseconds: i64) -> AMQPValue {
    AMQPValue::Timestamp(u64::try_from(milliseconds.div_euclid(1000)).unwrap_or(0))
}
