//! The orders service: one consumer with exponential backoff.
//!
//! ```text
//! cargo run --example orders            # consume until Ctrl-C
//! cargo run --example orders -- --demo  # publish sample orders and watch them move
//! ```
//!
//! Environment: `AMQP_URL` (default `amqp://guest:guest@127.0.0.1:5672/%2f`;
//! a comma-separated list for the nodes of a cluster),
//! `ORDERS_QUEUE` (default `orders`; every other name derives from it),
//! `ORDERS_DELAYS` (default `5s,15s,60s`; `--demo` uses `1s,2s,4s` unless set),
//! `ORDERS_QUEUE_TYPE` (`quorum`, the default: replicated queues; or
//! `classic`, to adopt a classic topology),
//! `METRICS_ADDR` (e.g. `127.0.0.1:9464`: serves `/metrics` in Prometheus'
//! text format, `/health/ready` and `/health/live`),
//! `ORDERS_DATABASE` (`down`: an outage, every order fails with
//! `database unavailable` until the service runs without it; a group of
//! dead letters to replay once it is fixed).
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

/// How each order ended, for the demo's summary. Only the demo (and the
/// tests) keep them: a service runs without end, and a map that grows with
/// every order it ever handled would grow its memory without bound.
#[derive(Default)]
struct Outcomes {
    settled: Mutex<BTreeMap<u64, String>>,
    tiers: usize,
    keep: bool,
    /// The database is down (`ORDERS_DATABASE=down`).
    database_down: bool,
}

#[backoff_consumer(queue = "orders", delays = "5s,15s,60s")]
async fn process_order(
    order: Order,
    ctx: &Context,
    outcomes: State<Outcomes>,
) -> Result<(), OrderError> {
    let result = match order.fail {
        _ if outcomes.database_down => Err(OrderError::Unavailable),
        Fail::None => Ok(()),
        Fail::Transient if order.attempts.is_some_and(|n| ctx.retry_count() >= n) => Ok(()),
        Fail::Transient => Err(OrderError::Unavailable),
        Fail::Permanent => Err(OrderError::Invalid(format!(
            "order {} cannot be fulfilled",
            order.id
        ))),
    };
    if outcomes.keep {
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
    }
    result
}

/// Installs the Prometheus recorder and serves `/metrics` beside the health
/// endpoints on `addr`.
async fn serve_metrics_and_health(
    addr: &str,
    health: rabbit_backoff::HealthWatch,
) -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    let app = rabbit_backoff::http::health_routes(health).route(
        "/metrics",
        axum::routing::get(move || std::future::ready(prometheus.render())),
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!("metrics at http://{addr}/metrics, health at http://{addr}/health/ready");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the metrics server stopped: {e}");
        }
    });
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,lapin=warn,rabbit_backoff=debug".into()),
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
    let queue_type: Option<rabbit_backoff::QueueType> = match std::env::var("ORDERS_QUEUE_TYPE") {
        Ok(s) => Some(
            s.parse()
                .map_err(|e| format!("ORDERS_QUEUE_TYPE={s:?}: {e}"))?,
        ),
        Err(_) => None,
    };

    let mut spec = process_order.spec();
    if let Some(queue) = queue {
        spec.queue = queue;
    }
    if let Some(delays) = delays {
        spec.delays = delays;
    }
    if let Some(queue_type) = queue_type {
        spec.queue_type = Some(queue_type);
    }
    let outcomes = std::sync::Arc::new(Outcomes {
        tiers: spec.delays.len(),
        keep: demo,
        database_down: std::env::var("ORDERS_DATABASE").is_ok_and(|s| s == "down"),
        ..Outcomes::default()
    });
    let runtime = Runtime::builder()
        .uri(&url)
        .state_arc(outcomes.clone())
        .consumer_with(process_order, |s| *s = spec.clone())
        .build()?;
    if let Ok(addr) = std::env::var("METRICS_ADDR") {
        serve_metrics_and_health(&addr, runtime.health()).await?;
    }
    let names = spec.names();
    tracing::info!(
        "{} queue {} with retry tiers {} (dead letters in {})",
        spec.effective_queue_type().as_str(),
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
        "Dead letters wait in {} with x-retry-count, x-error, x-failed-at and x-dead-letter-reason.",
        names.dead_letter_queue
    );
    Ok(())
}

/// The handler's retry path, tested without a broker: the in-memory broker
/// and tokio's paused clock play the 5s, 15s, 60s schedule in milliseconds.
#[cfg(test)]
mod tests {
    use super::*;
    use rabbit_backoff::testing::TestBroker;

    async fn start(
        broker: &TestBroker,
    ) -> (std::sync::Arc<Outcomes>, rabbit_backoff::RunningRuntime) {
        let outcomes = std::sync::Arc::new(Outcomes {
            tiers: 3,
            keep: true,
            ..Outcomes::default()
        });
        let runtime = Runtime::builder()
            .transport(broker.clone())
            .state_arc(outcomes.clone())
            .handle_signals(false)
            .consumer(process_order)
            .start()
            .await
            .expect("starts on the in-memory broker");
        (outcomes, runtime)
    }

    #[tokio::test(start_paused = true)]
    async fn an_order_that_keeps_failing_walks_every_tier_into_the_dead_letter_queue() {
        let broker = TestBroker::new();
        let (outcomes, runtime) = start(&broker).await;
        let order = Order {
            id: 4,
            fail: Fail::Transient,
            attempts: None,
        };
        broker.publish_json("orders", "orders", &order).await;
        let started = tokio::time::Instant::now();
        broker.run_until_idle().await;

        let dead = broker.dead_letters("orders.dlq");
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].retry_count(), 3);
        assert_eq!(
            dead[0].header_str("x-dead-letter-reason").as_deref(),
            Some("exhausted")
        );
        assert!(
            started.elapsed() >= Duration::from_secs(5 + 15 + 60),
            "every tier waited, in virtual time"
        );
        assert_eq!(
            outcomes.settled.lock().unwrap()[&4],
            "dead-lettered after 4 attempts (exhausted)"
        );
        runtime.stop().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_failure_skips_the_tiers_and_a_retried_order_succeeds() {
        let broker = TestBroker::new();
        let (outcomes, runtime) = start(&broker).await;
        broker
            .publish_json(
                "orders",
                "orders",
                &Order {
                    id: 2,
                    fail: Fail::Transient,
                    attempts: Some(2),
                },
            )
            .await;
        broker
            .publish_json(
                "orders",
                "orders",
                &Order {
                    id: 3,
                    fail: Fail::Permanent,
                    attempts: None,
                },
            )
            .await;
        broker.run_until_idle().await;

        let dead = broker.dead_letters("orders.dlq");
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].json::<Order>().unwrap().id, 3);
        assert_eq!(dead[0].retry_count(), 0);
        let settled = outcomes.settled.lock().unwrap().clone();
        assert_eq!(settled[&2], "handled on attempt 3");
        assert_eq!(settled[&3], "dead-lettered at once (permanent)");
        runtime.stop().await.unwrap();
    }
}
