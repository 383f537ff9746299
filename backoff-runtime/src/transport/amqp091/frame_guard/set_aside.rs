//! What a delivery whose headers the guard set aside carries instead, and
//! how operations show it.

use std::fmt;

use lapin::BasicProperties;
use lapin::types::AMQPValue;
use rabbit_backoff_core::MAX_HEADER_DEPTH;
use rabbit_backoff_core::headers::DEEP_HEADERS;

use rabbit_backoff_core::deep_headers::unpack;

/// Headers the frame guard set aside: what a delivery whose headers nest too
/// deeply carries instead (see the [module](self) documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SetAside {
    /// They nest this deep, in this many encoded bytes; the broker's copy is
    /// intact.
    Deep {
        /// Levels of tables and arrays.
        depth: usize,
        /// The encoded table's size.
        len: usize,
    },
    /// They are not a well-formed table.
    Unreadable,
}

/// The packed headers `properties` stand for, when their headers are the
/// flat table (empty when the original could not be read).
pub(crate) fn packed_headers(properties: &BasicProperties) -> Option<&[u8]> {
    let table = properties.headers().as_ref()?.inner();
    if table.len() != 1 {
        return None;
    }
    match table.get(DEEP_HEADERS)? {
        AMQPValue::ByteArray(packed) => Some(packed.as_slice()),
        _ => None,
    }
}

impl SetAside {
    /// The headers `properties` stand for, when they are the flat table.
    pub(crate) fn of(properties: &BasicProperties) -> Option<SetAside> {
        Some(match unpack(packed_headers(properties)?) {
            Ok(unpacked) => SetAside::Deep {
                depth: unpacked.depth,
                len: 4 + unpacked.entries.len(),
            },
            Err(_) => SetAside::Unreadable,
        })
    }
}

impl fmt::Display for SetAside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetAside::Deep { depth, len } => write!(
                f,
                "its headers nest {depth} levels deep ({len} bytes), more than {MAX_HEADER_DEPTH}"
            ),
            SetAside::Unreadable => f.write_str("its headers are not a well-formed field table"),
        }
    }
}
