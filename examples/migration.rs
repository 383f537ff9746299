//! Migrating from the article's hand-written consumer, step by step
//! (docs/migrating.md).
//!
//! ```text
//! cargo run --example migration -- declare     # the article's topology, as its Node code declares it
//! cargo run --example migration -- old         # the article's loop, by hand with lapin (until Ctrl-C)
//! cargo run --example migration -- new         # the same consumer on rabbit-backoff (until Ctrl-C)
//! cargo run --example migration -- publish 500 1000 # jobs 1000..1499: 50% ok, 30% ok after retries, 20% dead-lettered
//! ```
//!
//! Every consumer prints, on exit, how many jobs it finished (`ok`),
//! retried and dead-lettered. Environment: `AMQP_URL`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use futures_util::StreamExt;
use rabbit_backoff::lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use rabbit_backoff::lapin::types::{AMQPValue, FieldTable, LongString};
use rabbit_backoff::lapin::{self, BasicProperties, Connection, ConnectionProperties};
use rabbit_backoff::prelude::*;
use serde::{Deserialize, Serialize};

/// The article's schedule, in milliseconds.
const DELAYS: [u64; 3] = [1000, 2000, 4000];

#[derive(Debug, Serialize, Deserialize)]
struct Job {
    id: u64,
    /// Fails (transiently) while the retry count is below this; `None`: always.
    fail_until: Option<u32>,
    /// Fails permanently.
    #[serde(default)]
    invalid: bool,
}

#[derive(Debug, thiserror::Error, Classify)]
enum JobError {
    #[error("dependency unavailable")]
    Unavailable,
    #[permanent]
    #[error("invalid job {0}")]
    Invalid(u64),
}

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    retried: AtomicU64,
    dead: AtomicU64,
}

impl Counts {
    fn print(&self, who: &str) {
        println!(
            "{who}: ok {}, retried {}, dead-lettered {}",
            self.ok.load(Ordering::Relaxed),
            self.retried.load(Ordering::Relaxed),
            self.dead.load(Ordering::Relaxed)
        );
    }
}

/// The attribute that adopts the article's topology as it stands.
#[backoff_consumer(
    queue = "work_queue",
    queue_type = "classic",
    delays = "1s,2s,4s",
    exchange = "work_exchange",
    routing_key = "work",
    retry_exchange = "retry_exchange",
    retry_queue = "retry_{ms}ms",
    dead_letter_exchange = "dlx_exchange",
    dead_letter_queue = "dead_letter_queue",
    dead_letter_routing_key = "dead",
    retry_return = "exchange"
)]
async fn process_job(job: Job, ctx: &Context, counts: State<Counts>) -> Result<(), JobError> {
    let result = verdict(&job, ctx.retry_count());
    match &result {
        Ok(()) => counts.ok.fetch_add(1, Ordering::Relaxed),
        Err(JobError::Unavailable) if (ctx.retry_count() as usize) < DELAYS.len() => {
            counts.retried.fetch_add(1, Ordering::Relaxed)
        }
        Err(_) => counts.dead.fetch_add(1, Ordering::Relaxed),
    };
    result
}

fn verdict(job: &Job, retry_count: u32) -> Result<(), JobError> {
    if job.invalid {
        return Err(JobError::Invalid(job.id));
    }
    match job.fail_until {
        Some(n) if retry_count >= n => Ok(()),
        _ => Err(JobError::Unavailable),
    }
}

async fn connect() -> Result<Connection, lapin::Error> {
    Connection::connect(
        &rabbit_backoff::amqp_url_from_env(),
        ConnectionProperties::default(),
    )
    .await
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.as_bytes()))
}

/// The article's declarations: retry queues dead-letter through the work exchange.
async fn declare() -> Result<(), lapin::Error> {
    let connection = connect().await?;
    let channel = connection.create_channel().await?;
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for exchange in ["work_exchange", "retry_exchange", "dlx_exchange"] {
        channel
            .exchange_declare(
                exchange.into(),
                lapin::ExchangeKind::Direct,
                durable,
                FieldTable::default(),
            )
            .await?;
    }
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    let mut work = FieldTable::default();
    work.insert("x-dead-letter-exchange".into(), text("dlx_exchange"));
    work.insert("x-dead-letter-routing-key".into(), text("dead"));
    channel
        .queue_declare("work_queue".into(), durable, work)
        .await?;
    channel
        .queue_bind(
            "work_queue".into(),
            "work_exchange".into(),
            "work".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    for ms in DELAYS {
        let name = format!("retry_{ms}ms");
        let mut retry = FieldTable::default();
        retry.insert("x-message-ttl".into(), AMQPValue::LongInt(ms as i32));
        retry.insert("x-dead-letter-exchange".into(), text("work_exchange"));
        retry.insert("x-dead-letter-routing-key".into(), text("work"));
        channel
            .queue_declare(name.as_str().into(), durable, retry)
            .await?;
        channel
            .queue_bind(
                name.as_str().into(),
                "retry_exchange".into(),
                name.as_str().into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
    }
    channel
        .queue_declare("dead_letter_queue".into(), durable, FieldTable::default())
        .await?;
    channel
        .queue_bind(
            "dead_letter_queue".into(),
            "dlx_exchange".into(),
            "dead".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    println!("declared the article's topology");
    connection.close(200, "declared".into()).await
}

/// The article's loop: republish to `retry_exchange` / `retry_<ms>ms` with
/// `x-retry-count + 1`, or to `dlx_exchange` / `dead` with `x-error` and
/// `x-failed-at` (JavaScript's ISO form) and no reason; then ack.
async fn old() -> Result<(), lapin::Error> {
    let connection = connect().await?;
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    channel.basic_qos(10, BasicQosOptions::default()).await?;
    let mut deliveries = channel
        .basic_consume(
            "work_queue".into(),
            "article-loop".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let counts = Counts::default();
    loop {
        let delivery = tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            next = deliveries.next() => match next {
                Some(Ok(delivery)) => delivery,
                _ => break,
            },
        };
        let count = match delivery
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get("x-retry-count"))
        {
            Some(AMQPValue::LongLongInt(n)) => *n as u32,
            Some(AMQPValue::LongInt(n)) => *n as u32,
            Some(AMQPValue::ShortShortUInt(n)) => u32::from(*n),
            _ => 0,
        };
        let mut headers = delivery.properties.headers().clone().unwrap_or_default();
        let target = match serde_json::from_slice::<Job>(&delivery.data) {
            Ok(job) => match verdict(&job, count) {
                Ok(()) => {
                    counts.ok.fetch_add(1, Ordering::Relaxed);
                    None
                }
                Err(JobError::Unavailable) if (count as usize) < DELAYS.len() => {
                    counts.retried.fetch_add(1, Ordering::Relaxed);
                    headers.insert("x-retry-count".into(), AMQPValue::LongInt(count as i32 + 1));
                    Some((
                        "retry_exchange",
                        format!("retry_{}ms", DELAYS[count as usize]),
                    ))
                }
                Err(e) => {
                    counts.dead.fetch_add(1, Ordering::Relaxed);
                    headers.insert("x-error".into(), text(&e.to_string()));
                    let now = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
                    headers.insert("x-failed-at".into(), text(&now));
                    Some(("dlx_exchange", "dead".to_owned()))
                }
            },
            Err(_) => Some(("dlx_exchange", "dead".to_owned())),
        };
        if let Some((exchange, key)) = target {
            let mut properties = BasicProperties::default()
                .with_delivery_mode(2)
                .with_headers(headers);
            if let Some(id) = delivery.properties.message_id() {
                properties = properties.with_message_id(id.clone());
            }
            channel
                .basic_publish(
                    exchange.into(),
                    key.as_str().into(),
                    BasicPublishOptions::default(),
                    &delivery.data,
                    properties,
                )
                .await?
                .await?;
        }
        delivery.acker.ack(BasicAckOptions::default()).await?;
    }
    counts.print("old");
    connection.close(200, "stopped".into()).await
}

async fn publish(first: u64, n: u64) -> Result<(), rabbit_backoff::Error> {
    let publisher = Publisher::connect(&rabbit_backoff::amqp_url_from_env()).await?;
    for id in first..first + n {
        let job = match id % 10 {
            0..=4 => Job {
                id,
                fail_until: Some(0),
                invalid: false,
            },
            5 | 6 => Job {
                id,
                fail_until: Some(1),
                invalid: false,
            },
            7 => Job {
                id,
                fail_until: Some(3),
                invalid: false,
            },
            8 => Job {
                id,
                fail_until: None,
                invalid: false,
            },
            _ => Job {
                id,
                fail_until: None,
                invalid: true,
            },
        };
        publisher
            .publish(
                "work_exchange",
                "work",
                Outgoing::json(&job)?.message_id(format!("job-{id}")),
            )
            .await?;
    }
    println!("published jobs {first} to {}", first + n - 1);
    publisher.close().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("declare") => declare().await?,
        Some("old") => old().await?,
        Some("new") => {
            let counts = std::sync::Arc::new(Counts::default());
            Runtime::builder()
                .state_arc(std::sync::Arc::clone(&counts))
                .consumer(process_job)
                .run()
                .await?;
            counts.print("new");
        }
        Some("publish") => {
            let n = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(500);
            let first = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(0);
            publish(first, n).await?;
        }
        _ => eprintln!("usage: migration declare | old | new | publish [N [FIRST ID]]"),
    }
    Ok(())
}
