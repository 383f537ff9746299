//! The sides, started: the framework's runtime, or a hand-written loop on a
//! connection of its own.

pub(crate) mod amqp1_loop;
pub(crate) mod dedupe;
pub(crate) mod hand_written;

use std::sync::Arc;

use rabbit_backoff::prelude::*;
use rabbit_backoff::{Dedupe, ShutdownHandle};
use rabbit_backoff_core::ConsumerSpec;

use crate::names::Names;
use crate::side::Side;
use crate::target::{Target, closed, connect};
use crate::work::{Tally, framework};
use amqp1_loop::amqp1_loop;
use dedupe::{DEDUPE_WINDOW, dedupe_store};
use hand_written::{DeadLetterHeaders, Retries, baseline, baseline_spawned};

/// Starts one side; returns the handle that stops it and its task.
pub(crate) async fn start(
    target: &Target,
    side: Side,
    spec: &ConsumerSpec,
    names: &Names,
    tally: &Arc<Tally>,
) -> (ShutdownHandle, tokio::task::JoinHandle<()>) {
    match side {
        Side::Article | Side::Full | Side::Delayed | Side::Spawned | Side::SpawnedFull => {
            let headers = match side {
                Side::Full | Side::SpawnedFull => DeadLetterHeaders::Full,
                _ => DeadLetterHeaders::Article,
            };
            let retries = if side == Side::Delayed {
                Retries::DelayedRequeue
            } else {
                Retries::Tiers
            };
            let spawned = matches!(side, Side::Spawned | Side::SpawnedFull);
            let stop = ShutdownHandle::default();
            let connection = connect(target).await;
            let (spec, names, tally, stop2) =
                (spec.clone(), names.clone(), tally.clone(), stop.clone());
            let task = tokio::spawn(async move {
                if spawned {
                    baseline_spawned(&connection, spec, names, tally, stop2, headers).await;
                } else {
                    baseline(&connection, spec, names, tally, stop2, headers, retries).await;
                }
                closed(connection.close(200, "".into())).await;
            });
            (stop, task)
        }
        Side::Guarded => {
            let stop = ShutdownHandle::default();
            let connection = rabbit_backoff::transport::AmqpTransport::new(target.first_node())
                .connect_amqp()
                .await
                .expect("the runtime's connection");
            let (spec, names, tally, stop2) =
                (spec.clone(), names.clone(), tally.clone(), stop.clone());
            let task = tokio::spawn(async move {
                let lapin = connection.lapin();
                baseline(
                    lapin,
                    spec,
                    names,
                    tally,
                    stop2,
                    DeadLetterHeaders::Article,
                    Retries::Tiers,
                )
                .await;
                closed(lapin.close(200, "".into())).await;
            });
            (stop, task)
        }
        Side::Amqp1Loop => {
            let stop = ShutdownHandle::default();
            // AMQP 0-9-1 for the dead-letter copies, AMQP 1.0 to consume.
            let connection = connect(target).await;
            // `AMQP_URL` without its path, as fe2o3-amqp takes it.
            let url = rabbit_backoff_test_support::amqp1::address(target.first_node());
            let (spec, names, tally, stop2) =
                (spec.clone(), names.clone(), tally.clone(), stop.clone());
            let task = tokio::spawn(async move {
                amqp1_loop(&url, &connection, spec, names, tally, stop2).await;
                closed(connection.close(200, "".into())).await;
            });
            (stop, task)
        }
        // The framework's own sides (`Side::is_framework`).
        _ => {
            assert!(side.is_framework(), "a side with no start of its own");
            let mut builder = Runtime::builder()
                .uri(target.url.clone())
                .state_arc(tally.clone())
                .handle_signals(false);
            let mut spec = spec.clone();
            if side.dedupe() {
                builder = builder.dedupe_store(dedupe_store(side, spec.prefetch).await);
                spec.dedupe = Some(Dedupe::new(DEDUPE_WINDOW));
            }
            let runtime = builder
                .consumer_with(framework, |s| *s = spec)
                .build()
                .expect("runtime");
            let stop = runtime.shutdown_handle();
            let task = tokio::spawn(async move { runtime.run().await.expect("the runtime runs") });
            (stop, task)
        }
    }
}
