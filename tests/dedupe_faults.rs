//! Exactly-once effects through faults: 2000 messages whose handler inserts
//! its effect row in the inbox's PostgreSQL transaction, while the consumer
//! process is SIGKILLed, and while its broker connection is cut (a TCP
//! proxy: what a broker restart does to a consumer, without stopping the
//! broker other tests share). With dedupe: no effect row twice, none
//! missing. The same run without dedupe (the row inserted, then the ack)
//! prints the duplicates the inbox prevents.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::stores::{self, PgCleanup, Proxy};
use common::*;
use rabbit_backoff::dedupe::{PostgresStore, Tx, sqlx};
use rabbit_backoff::prelude::*;
use serde::{Deserialize, Serialize};

const N: i64 = 2_000;

#[derive(Debug, Serialize, Deserialize)]
struct Work {
    id: i64,
}

#[derive(Debug, thiserror::Error, Classify)]
enum WorkError {
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// The table effects go to, and the pool of the run without dedupe.
struct Effects {
    table: String,
    pool: sqlx::PgPool,
}

/// The handler's work after its write (a call to another service, say):
/// slow enough (a few hundred messages a second) to be stopped mid-run, with
/// effects written and not yet acknowledged.
const WORK: Duration = Duration::from_millis(20);

#[backoff_consumer(queue = "placeholder", delays = "100ms", prefetch = 50, dedupe = "24h")]
async fn apply_once(work: Work, tx: Tx<'_>, effects: State<Effects>) -> Result<(), WorkError> {
    sqlx::query(&format!("INSERT INTO {} (id) VALUES ($1)", effects.table))
        .bind(work.id)
        .execute(&mut *tx.conn().await?)
        .await?;
    tokio::time::sleep(WORK).await;
    Ok(())
}

#[backoff_consumer(queue = "placeholder", delays = "100ms", prefetch = 50)]
async fn apply_plain(work: Work, effects: State<Effects>) -> Result<(), WorkError> {
    sqlx::query(&format!("INSERT INTO {} (id) VALUES ($1)", effects.table))
        .bind(work.id)
        .execute(&effects.pool)
        .await?;
    tokio::time::sleep(WORK).await;
    Ok(())
}

/// A queue and an effects table of one run.
struct Run {
    spec: ConsumerSpec,
    table: String,
    store: PostgresStore,
    dedupe: bool,
    _cleanup: Cleanup,
    _pg: PgCleanup,
}

impl Run {
    async fn new(name: &str, dedupe: bool) -> Run {
        let mut spec = if dedupe {
            apply_once.spec()
        } else {
            apply_plain.spec()
        };
        spec.queue = unique(name);
        let table = format!("effects_{}", spec.queue.replace('.', "_"));
        let store = stores::postgres().await;
        sqlx::query(&format!("CREATE TABLE {table} (id bigint NOT NULL)"))
            .execute(store.pool())
            .await
            .unwrap();
        rabbit_backoff::topology::declare_topology(
            &*framework_connection().await,
            &rabbit_backoff::topology::Topology::of(&spec),
        )
        .await
        .unwrap();
        let publisher = publisher().await;
        for id in 0..N {
            publisher.publish_to(&spec, &Work { id }).await.unwrap();
        }
        publisher.close().await;
        Run {
            _cleanup: Cleanup::of(&spec),
            _pg: PgCleanup {
                consumers: vec![spec.queue.clone()],
            },
            spec,
            table,
            store,
            dedupe,
        }
    }

    /// (rows, distinct ids).
    async fn effects(&self) -> (i64, i64) {
        sqlx::query_as(&format!(
            "SELECT count(*), count(DISTINCT id) FROM {}",
            self.table
        ))
        .fetch_one(self.store.pool())
        .await
        .unwrap()
    }

    async fn wait_for_effects(&self, at_least: i64, within: Duration) {
        let deadline = Instant::now() + within;
        while self.effects().await.1 < at_least {
            assert!(
                Instant::now() < deadline,
                "only {:?} effects (rows, distinct) of {at_least}",
                self.effects().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A runtime consuming this run's queue at `uri`.
    fn runtime(&self, uri: &str) -> Runtime {
        let effects = Effects {
            table: self.table.clone(),
            pool: self.store.pool().clone(),
        };
        let builder = Runtime::builder()
            .uri(uri)
            .handle_signals(false)
            .reconnect_backoff(Duration::from_millis(100), Duration::from_millis(500))
            .state(effects)
            .dedupe_store(self.store.clone());
        let queue = self.spec.queue.clone();
        let builder = if self.dedupe {
            builder.consumer_with(apply_once, |spec| spec.queue = queue)
        } else {
            builder.consumer_with(apply_plain, |spec| spec.queue = queue)
        };
        builder.build().unwrap()
    }

    /// Waits until every id has its effect and the queue is empty; prints
    /// and returns the duplicates.
    async fn finish(&self, fault: &str, stopped_after: i64) -> i64 {
        self.wait_for_effects(N, Duration::from_secs(120)).await;
        let (_c, channel) = channel().await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while depth(&channel, &self.spec.queue).await > 0 {
            assert!(Instant::now() < deadline, "messages left in the queue");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (rows, distinct) = self.effects().await;
        assert_eq!(distinct, N, "lost effects");
        assert_eq!(
            depth(&channel, &self.spec.names().dead_letter_queue).await,
            0
        );
        let duplicates = rows - distinct;
        println!(
            "{fault} after {stopped_after} of {N} effects, {}: {rows} effect rows, {duplicates} duplicates, 0 lost",
            if self.dedupe {
                "dedupe on PostgreSQL"
            } else {
                "without dedupe"
            }
        );
        let _ = sqlx::query(&format!("DROP TABLE {}", self.table))
            .execute(self.store.pool())
            .await;
        duplicates
    }
}

// ---- SIGKILL ----

/// The child process of `a_killed_consumer_*`: not a test of its own.
#[test]
#[ignore = "the child process of the SIGKILL tests"]
fn dedupe_child_process() {
    let queue = std::env::var("RB_DEDUPE_QUEUE").expect("run by a SIGKILL test");
    let dedupe = std::env::var("RB_DEDUPE_ON").expect("run by a SIGKILL test") == "1";
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let store = stores::postgres().await;
        let table = format!("effects_{}", queue.replace('.', "_"));
        let mut spec = apply_once.spec();
        spec.queue = queue;
        let run = Run {
            _cleanup: Cleanup::default(),
            _pg: PgCleanup { consumers: vec![] },
            spec,
            table,
            store,
            dedupe,
        };
        run.runtime(&url()).run().await.unwrap();
    });
}

fn spawn_child(run: &Run) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "dedupe_child_process",
            "--exact",
            "--include-ignored",
            "--nocapture",
        ])
        .env("RB_DEDUPE_QUEUE", &run.spec.queue)
        .env("RB_DEDUPE_ON", if run.dedupe { "1" } else { "0" })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child consumer")
}

async fn killed_mid_run(dedupe: bool) -> i64 {
    let run = Run::new("killed", dedupe).await;
    let mut child = spawn_child(&run);
    run.wait_for_effects(N / 4, Duration::from_secs(60)).await;
    child.kill().expect("SIGKILL the child");
    child.wait().unwrap();
    let killed_after = run.effects().await.0;
    let mut child = spawn_child(&run);
    let duplicates = run.finish("SIGKILL", killed_after).await;
    child.kill().unwrap();
    child.wait().unwrap();
    duplicates
}

#[tokio::test]
async fn a_consumer_killed_mid_run_leaves_no_duplicate_effect_with_dedupe() {
    let without = killed_mid_run(false).await;
    let with = killed_mid_run(true).await;
    assert_eq!(with, 0, "duplicate effects with dedupe");
    println!("SIGKILL: {without} duplicate effects without dedupe, {with} with");
}

// ---- the broker connection cut ----

async fn cut_mid_run(dedupe: bool) -> i64 {
    let run = Run::new("cut", dedupe).await;
    let mut proxy = Proxy::start(broker_port()).await;
    let uri = format!("amqp://guest:guest@127.0.0.1:{}/%2f", proxy.port);
    let running = run.runtime(&uri).start().await.unwrap();
    run.wait_for_effects(N / 4, Duration::from_secs(60)).await;
    proxy.cut();
    let cut_after = run.effects().await.0;
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.restore().await;
    let duplicates = run.finish("broker connection cut", cut_after).await;
    running.stop().await.unwrap();
    duplicates
}

#[tokio::test]
async fn a_broker_connection_cut_mid_run_leaves_no_duplicate_effect_with_dedupe() {
    let without = cut_mid_run(false).await;
    let with = cut_mid_run(true).await;
    assert_eq!(with, 0, "duplicate effects with dedupe");
    println!("connection cut: {without} duplicate effects without dedupe, {with} with");
}
