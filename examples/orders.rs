//! The orders service: one consumer with exponential backoff.
//!
//! ```text
//! cargo run --example orders            # consume until Ctrl-C
//! cargo run --example orders -- --demo  # publish sample orders and watch them move
//! ```
//!
//! Environment: `AMQP_URL` (default `amqp://guest:guest@127.0.0.1:5672/%2f`),
//! `ORDERS_QUEUE` (default `orders`; every other name derives from it),
//! `ORDERS_DELAYS` (default `5s,15s,60s`; `--demo` uses `1s,2s,4s` unless set).
//!
//! Payload: `{"id": 1, "fail": "none" | "transient" | "permanent", "attempts": 2}`.
//! `transient` fails while the message's retry count is below `attempts`
//! (always, when absent); `permanent` fails with the permanent variant.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use rabbit_backoff::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Fail {
    None,
    Transient,
    Permanent,
}

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    id: u64,
    fail: Fail,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
}

#[derive(Debug, thiserror::Error, Classify)]
enum OrderError {
    #[error("database unavailable")]
    Unavailable,
    #[permanent]
    #[error("invalid order: {0}")]
    Invalid(String),
}

/// How each order ended, for the demo's summary.
#[derive(Default)]
struct Outcomes {
    settled: Mutex<BTreeMap<u64, String>>,
    tiers: usize,
}

#[backoff_consumer(queue = "orders", delays = "5s,15s,60s")]
async fn process_order(
    order: Order,
    ctx: &Context,
    outcomes: State<Outcomes>,
) -> Result<(), OrderError> {
    let result = match order.fail {
        Fail::None => Ok(()),
        Fail::Transient if order.attempts.is_some_and(|n| ctx.retry_count() >= n) => Ok(()),
        Fail::Transient => Err(OrderError::Unavailable),
        Fail::Permanent => Err(OrderError::Invalid(format!(
            "order {} cannot be fulfilled",
            order.id
        ))),
    };
    let settled = match &result {
        Ok(()) => Some(format!("handled on attempt {}", ctx.attempt())),
        Err(OrderError::Invalid(_)) => Some("dead-lettered at once (permanent)".to_owned()),
        Err(OrderError::Unavailable) if ctx.retry_count() as usize >= outcomes.tiers => Some(
            format!("dead-lettered after {} attempts (exhausted)", ctx.attempt()),
        ),
        Err(OrderError::Unavailable) => None,
    };
    if let Some(settled) = settled {
        outcomes
            .settled
            .lock()
            .expect("not poisoned")
            .insert(order.id, settled);
    }
    result
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,lapin=warn,backoff_runtime=debug".into()),
        )
        .with_target(false)
        .init();

    let demo = std::env::args().any(|a| a == "--demo");
    let url = rabbit_backoff::amqp_url_from_env();
    let queue = std::env::var("ORDERS_QUEUE").ok();
    let delays: Option<Delays> = match std::env::var("ORDERS_DELAYS") {
        Ok(s) => Some(s.parse().map_err(|e| format!("ORDERS_DELAYS={s:?}: {e}"))?),
        Err(_) if demo => Some("1s,2s,4s".parse()?),
        Err(_) => None,
    };

    let mut spec = process_order.spec();
    if let Some(queue) = queue {
        spec.queue = queue;
    }
    if let Some(delays) = delays {
        spec.delays = delays;
    }
    let outcomes = std::sync::Arc::new(Outcomes {
        tiers: spec.delays.len(),
        ..Outcomes::default()
    });
    let runtime = Runtime::builder()
        .uri(&url)
        .state_arc(outcomes.clone())
        .consumer_with(process_order, |s| *s = spec.clone())
        .build()?;
    let names = spec.names();
    tracing::info!(
        "queue {} with retry tiers {} (dead letters in {})",
        names.queue,
        spec.delays,
        names.dead_letter_queue
    );

    if !demo {
        runtime.run().await?;
        return Ok(());
    }

    let shutdown = runtime.shutdown_handle();
    let health = runtime.health();
    let running = tokio::spawn(runtime.run());
    if let Err(state) = health.wait_ready().await {
        running.await??;
        return Err(format!("the consumer did not start: {state:?}").into());
    }
    let publisher = Publisher::connect(&url).await?;
    let samples = [
        Order {
            id: 1,
            fail: Fail::None,
            attempts: None,
        },
        Order {
            id: 2,
            fail: Fail::Transient,
            attempts: Some(2),
        },
        Order {
            id: 3,
            fail: Fail::Permanent,
            attempts: None,
        },
        Order {
            id: 4,
            fail: Fail::Transient,
            attempts: None,
        },
    ];
    for order in &samples {
        let id = publisher.publish_to(&spec, order).await?;
        tracing::info!(
            "published order {} ({:?}) as message {id}",
            order.id,
            order.fail
        );
    }
    let deadline = tokio::time::Instant::now() + spec.delays.total() + Duration::from_secs(30);
    while outcomes.settled.lock().expect("not poisoned").len() < samples.len() {
        if running.is_finished() || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.shutdown();
    running.await??;
    publisher.close().await;

    println!("\nDemo summary (queue {}):", names.queue);
    for (id, outcome) in outcomes.settled.lock().expect("not poisoned").iter() {
        println!("  order {id}: {outcome}");
    }
    println!(
        "Dead letters wait in {} with x-error, x-failed-at and x-retry-count.",
        names.dead_letter_queue
    );
    Ok(())
}
