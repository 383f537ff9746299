//! RabbitMQ 3.10's words for a refusal, so that an error from the in-memory
//! broker reads exactly like one from the real broker (the runtime parses some
//! of them, such as the argument name in `inequivalent arg '…'`).
//!
//! Sources: `rabbit_misc:not_found/1`, `rabbit_misc:assert_args_equivalence/4`,
//! `assert_field_equivalence/4`, `equivalence_fail/4` and `val/1`, and the
//! reply text format `"<NAME> - <explanation>"` of `rabbit_binary_generator`.

use rabbit_backoff_core::Argument;

use rabbit_backoff_runtime::transport::{NOT_FOUND, PRECONDITION_FAILED, TransportError};

/// `ACCESS_REFUSED`.
pub(crate) const ACCESS_REFUSED: u16 = 403;

/// `NOT_FOUND - no queue 'q' in vhost '/'` (or `exchange`).
pub(crate) fn not_found(kind: &str, name: &str) -> TransportError {
    TransportError::Refused {
        code: NOT_FOUND,
        text: format!("NOT_FOUND - no {kind} '{name}' in vhost '/'"),
    }
}

/// `PRECONDITION_FAILED - <explanation>`.
pub(crate) fn precondition_failed(explanation: impl std::fmt::Display) -> TransportError {
    TransportError::Refused {
        code: PRECONDITION_FAILED,
        text: format!("PRECONDITION_FAILED - {explanation}"),
    }
}

/// `ACCESS_REFUSED - <explanation>`.
pub(crate) fn access_refused(explanation: impl std::fmt::Display) -> TransportError {
    TransportError::Refused {
        code: ACCESS_REFUSED,
        text: format!("ACCESS_REFUSED - {explanation}"),
    }
}

/// A redeclaration that differs in one argument:
/// `inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received '200' but current is '100'`.
///
/// RabbitMQ writes a value present on both sides bare (`'200'`), and one
/// present on one side only with its type (`the value '100' of type 'long'`)
/// against `none`.
pub(crate) fn inequivalent_argument(
    queue: &str,
    key: &str,
    received: Option<&Argument>,
    current: Option<&Argument>,
) -> TransportError {
    let (received, current) = match (received, current) {
        (Some(r), Some(c)) => (bare(r), bare(c)),
        (r, c) => (typed(r), typed(c)),
    };
    precondition_failed(format_args!(
        "inequivalent arg '{key}' for queue '{queue}' in vhost '/': received {received} but current is {current}"
    ))
}

/// An exchange redeclared with another type:
/// `inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'`.
pub(crate) fn inequivalent_exchange_type(
    exchange: &str,
    received: &str,
    current: &str,
) -> TransportError {
    precondition_failed(format_args!(
        "inequivalent arg 'type' for exchange '{exchange}' in vhost '/': received '{received}' but current is '{current}'"
    ))
}

/// An argument whose value RabbitMQ refuses at declaration:
/// `invalid arg 'x-message-ttl' for queue 'q' in vhost '/': {value_negative,-1}`.
pub(crate) fn invalid_argument(queue: &str, key: &str, reason: &str) -> TransportError {
    precondition_failed(format_args!(
        "invalid arg '{key}' for queue '{queue}' in vhost '/': {reason}"
    ))
}

fn bare(value: &Argument) -> String {
    match value {
        Argument::Int(n) => format!("'{n}'"),
        Argument::Str(s) => format!("'{s}'"),
        other => format!("'{other:?}'"),
    }
}

fn typed(value: Option<&Argument>) -> String {
    match value {
        None => "none".to_owned(),
        // The runtime sends integers as AMQP long-long ('l'), which RabbitMQ
        // calls `long`, and strings as long strings (`longstr`).
        Some(Argument::Int(n)) => format!("the value '{n}' of type 'long'"),
        Some(Argument::Str(s)) => format!("the value '{s}' of type 'longstr'"),
        Some(other) => format!("the value {other:?}"),
    }
}
