//! Two consumers with different schedules and shared state in one binary:
//! orders are stored in an inventory, and each stored order asks the email
//! consumer, through a shared publisher, to send a confirmation.
//!
//! ```text
//! cargo run --example shop            # consume until Ctrl-C
//! cargo run --example shop -- --demo  # publish three orders, then stop
//! ```

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rabbit_backoff::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    id: u64,
    sku: String,
    email: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Email {
    to: String,
    subject: String,
}

#[derive(Debug, thiserror::Error, Classify)]
enum ShopError {
    #[permanent]
    #[error("unknown sku {0}")]
    UnknownSku(String),
    #[error("out of stock: {0}")]
    OutOfStock(String),
    #[error("cannot queue the confirmation email: {0}")]
    Publish(#[from] rabbit_backoff::Error),
}

#[derive(Debug, thiserror::Error, Classify)]
enum MailError {
    #[permanent]
    #[error("invalid address {0}")]
    InvalidAddress(String),
}

/// Stock per SKU, shared by every handler.
struct Inventory(Mutex<HashMap<String, u32>>);

/// Emails "sent", shared so the demo can print them.
#[derive(Default)]
struct Outbox(Mutex<Vec<String>>);

#[backoff_consumer(queue = "shop.orders", delays = "1s,5s,30s", prefetch = 20)]
async fn store_order(
    order: Order,
    inventory: State<Inventory>,
    publisher: State<Publisher>,
) -> Result<(), ShopError> {
    {
        let mut stock = inventory.0.lock().expect("not poisoned");
        let left = stock
            .get_mut(&order.sku)
            .ok_or_else(|| ShopError::UnknownSku(order.sku.clone()))?;
        *left = left
            .checked_sub(1)
            .ok_or_else(|| ShopError::OutOfStock(order.sku.clone()))?;
    }
    let email = Email {
        to: order.email,
        subject: format!("order {} confirmed", order.id),
    };
    publisher.publish_to(&send_email.spec(), &email).await?;
    Ok(())
}

#[backoff_consumer(queue = "shop.emails", delays = "10s,1m,10m", prefetch = 5)]
async fn send_email(email: Email, ctx: &Context, outbox: State<Outbox>) -> Result<(), MailError> {
    if !email.to.contains('@') {
        return Err(MailError::InvalidAddress(email.to));
    }
    let line = format!(
        "to {}: {} (attempt {})",
        email.to,
        email.subject,
        ctx.attempt()
    );
    outbox.0.lock().expect("not poisoned").push(line);
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
    let url = rabbit_backoff::amqp_url_from_env();
    let outbox = std::sync::Arc::new(Outbox::default());
    let stock = HashMap::from([("book".to_owned(), 10), ("lamp".to_owned(), 0)]);

    let runtime = Runtime::builder()
        .uri(&url)
        .state(Inventory(Mutex::new(stock)))
        .state(Publisher::connect(&url).await?)
        .state_arc(outbox.clone())
        .consumer(store_order)
        .consumer(send_email)
        .build()?;

    if !std::env::args().any(|a| a == "--demo") {
        runtime.run().await?;
        return Ok(());
    }
    let shutdown = runtime.shutdown_handle();
    let health = runtime.health();
    let running = tokio::spawn(runtime.run());
    if let Err(state) = health.wait_ready().await {
        running.await??;
        return Err(format!("the consumers did not start: {state:?}").into());
    }
    let publisher = Publisher::connect(&url).await?;
    for (id, sku, email) in [
        (1, "book", "ada@example.com"),
        (2, "lamp", "alan@example.com"),
        (3, "pen", "grace@example.com"),
    ] {
        let order = Order {
            id,
            sku: sku.into(),
            email: email.into(),
        };
        publisher.publish_to(&store_order.spec(), &order).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    shutdown.shutdown();
    running.await??;
    publisher.close().await;
    println!("\nOutbox:");
    for line in outbox.0.lock().expect("not poisoned").iter() {
        println!("  {line}");
    }
    println!(
        "Order 2 (lamp) is out of stock and waits in its retry tiers; order 3 (pen) is in shop.orders.dlq."
    );
    Ok(())
}
