//! Whether the broker holds retries back as RabbitMQ 4.3 does (its delayed
//! retries, and a `modified` delivery held until its `x-opt-delivery-time`),
//! asked before a consumer with `retry = "delayed"` or `"scheduled"`
//! declares anything.

use rabbit_backoff_core::{
    Argument, HeldRetries, QueueDecl, RetryBackend, SpecError, delayed_arguments,
};

use crate::error::{Error, channel_error};
use crate::transport::{Connection, PRECONDITION_FAILED, TransportError};

/// How long the probe queue outlives a process that died before deleting it
/// (`x-expires`, in milliseconds).
const PROBE_EXPIRES_MS: i64 = 60_000;

/// Refuses a consumer with `retry = "delayed"` on a broker that would ignore
/// the delayed retry arguments ([`Error::InvalidSpec`] with
/// [`SpecError::DelayedUnsupported`], naming the queue, the argument and the
/// broker): RabbitMQ 3.10 and 4.0 accept `x-delayed-retry-type` on a quorum
/// queue and ignore it, so every rejected message would be delivered again
/// at once, a hot loop. The same for `retry = "scheduled"`
/// ([`SpecError::ScheduledUnsupported`]): the release that applies the
/// delayed retry arguments, 4.3, is the one that holds a `modified`
/// delivery back until its `x-opt-delivery-time` (4.0 takes the annotation
/// and delivers the message again at once, measured in
/// `tests/broker_held_retry.rs`).
///
/// The answer comes first from the release the node named when the
/// connection opened ([`Connection::release`], decided by
/// [`BrokerRelease::held_retries`](rabbit_backoff_core::BrokerRelease::held_retries)): RabbitMQ 4.3 or later holds retries,
/// an earlier RabbitMQ does not, and nothing is asked of the broker. That
/// keeps a healthy start free of errors: asking by a declaration the broker
/// refuses closes a channel, which lapin logs at ERROR.
///
/// Only when the release says nothing certain (another product, a build
/// from source) is the broker asked: a classic queue (uniquely named,
/// expiring after a minute, deleted at once) is declared with
/// `x-delayed-retry-type`, `x-delayed-retry-min` and `x-expires`. A broker
/// that applies delayed retries knows these arguments as quorum queue
/// arguments, and refuses them on a classic queue (RabbitMQ 4.3:
/// `PRECONDITION_FAILED - invalid arg 'x-delayed-retry-min' for queue … of
/// queue type rabbit_classic_queue`); a broker that does not know them
/// accepts them as it accepts any unknown `x-` argument (3.10 and 4.0,
/// checked by `tests/semantics/topology.rs` and `tests/start_up.rs`; and the in-memory broker).
/// Either way nothing of the consumer's topology is declared on a broker
/// that would ignore it, where a work queue declared with arguments it
/// ignores would keep them, unapplied.
pub(crate) async fn check_broker_holds_retries(
    connection: &dyn Connection,
    queue: &str,
    backend: RetryBackend,
) -> Result<(), Error> {
    let Some(release) = connection.release() else {
        return ask_the_broker(connection, queue, backend).await;
    };
    match release.held_retries() {
        HeldRetries::Held => Ok(()),
        HeldRetries::NotHeld => Err(refusal(queue, backend, format!("is {release}"))),
        _ => ask_the_broker(connection, queue, backend).await,
    }
}

/// The refusal of `backend` on a broker that `found` describes.
fn refusal(queue: &str, backend: RetryBackend, found: String) -> Error {
    let source = match backend {
        RetryBackend::Scheduled => SpecError::ScheduledUnsupported { found },
        _ => SpecError::DelayedUnsupported {
            argument: delayed_arguments::TYPE,
            found,
        },
    };
    Error::InvalidSpec {
        queue: queue.to_owned(),
        source,
    }
}

/// Asks the broker by a declaration whether it applies delayed retries (see
/// [`check_broker_holds_retries`]).
pub(crate) async fn ask_the_broker(
    connection: &dyn Connection,
    queue: &str,
    backend: RetryBackend,
) -> Result<(), Error> {
    let channel = connection.open_channel().await.map_err(channel_error(
        queue,
        "opening a channel to ask whether the broker applies delayed retries",
    ))?;
    let probe = QueueDecl::new(format!(
        "rabbit-backoff.delayed-retry-probe.{:016x}",
        fastrand::u64(..)
    ))
    .with_argument(
        delayed_arguments::TYPE,
        Argument::Str(delayed_arguments::FAILED.to_owned()),
    )
    .with_argument(delayed_arguments::MIN, Argument::Int(1))
    .with_argument("x-expires", Argument::Int(PROBE_EXPIRES_MS));
    let declared = channel.declare_queue(&probe).await;
    let answer = match declared {
        Err(TransportError::Refused {
            code: PRECONDITION_FAILED,
            text,
        }) if text.contains("x-delayed-retry") => {
            // lapin has just logged this refusal at ERROR, as it logs every
            // channel the broker closes: say what it was, where it is seen
            // (docs/upstream.md, "A channel close logged at ERROR").
            tracing::warn!(
                queue,
                probe = %probe.name,
                "the broker named no RabbitMQ release, so it was asked whether it holds \
                 retries back: it refused the probe's '{}' on a classic queue, as RabbitMQ 4.3 \
                 does, so it does (lapin's `Channel closed` error just before this line is \
                 that expected answer)",
                delayed_arguments::MIN
            );
            Ok(())
        }
        Err(source) => Err(Error::Declare {
            object: "queue",
            name: probe.name.clone(),
            source,
        }),
        Ok(_) => {
            if let Err(e) = channel.delete_queue(&probe.name).await {
                tracing::debug!("deleting the probe queue {}: {e}", probe.name);
            }
            Err(refusal(
                queue,
                backend,
                format!(
                    "accepts the quorum queue argument '{}' without applying it, as RabbitMQ \
                     before 4.3 does",
                    delayed_arguments::TYPE
                ),
            ))
        }
    };
    channel.close().await;
    answer
}
