//! Stepping into an existing system: the article's own topology, whose retry
//! queues return through the work exchange (`retry_return = "exchange"`); an
//! operator-owned topology that the consumer only checks (`declare =
//! "passive"`); and a mixed fleet, a hand-written consumer of the article's
//! loop and a framework consumer competing on one queue.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use common::*;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeleteOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection};
use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, ReplayOptions};
use rabbit_backoff::prelude::*;
use rabbit_backoff::rules::parse_failed_at;
use rabbit_backoff::topology::{MissingObject, Topology};
use rabbit_backoff::{DeclareMode, Delays, Error, QueueType, RetryReturn};
use rabbit_backoff_test_support::declare::{self, arguments, text};

const WAIT: Duration = Duration::from_secs(20);

/// The article's names (`work_exchange`, `work_queue`, key `work`,
/// `retry_exchange`, `retry_{ms}ms`, `dlx_exchange`, `dead_letter_queue`, key
/// `dead`), each under a prefix of its own so that tests do not meet.
struct Article {
    prefix: String,
    work_exchange: String,
    work_queue: String,
    retry_exchange: String,
    dlx_exchange: String,
    dead_letter_queue: String,
    delays: Vec<u64>,
}

impl Article {
    fn new(name: &str, delays: &[u64]) -> Self {
        let prefix = unique(name);
        Article {
            work_exchange: format!("{prefix}.work_exchange"),
            work_queue: format!("{prefix}.work_queue"),
            retry_exchange: format!("{prefix}.retry_exchange"),
            dlx_exchange: format!("{prefix}.dlx_exchange"),
            dead_letter_queue: format!("{prefix}.dead_letter_queue"),
            delays: delays.to_vec(),
            prefix,
        }
    }

    fn retry_queue(&self, ms: u64) -> String {
        format!("{}.retry_{ms}ms", self.prefix)
    }

    /// The attribute's names, as `consumer_with` sets them.
    fn configure(&self, spec: &mut ConsumerSpec) {
        spec.queue = self.work_queue.clone();
        // The article declares classic queues.
        spec.queue_type = Some(QueueType::Classic);
        spec.delays = Delays::from_millis(self.delays.clone()).expect("delays");
        spec.names.exchange = Some(self.work_exchange.clone());
        spec.names.routing_key = Some("work".into());
        spec.names.retry_exchange = Some(self.retry_exchange.clone());
        spec.names.retry_queue = Some(format!("{}.retry_{{ms}}ms", self.prefix));
        spec.names.dead_letter_exchange = Some(self.dlx_exchange.clone());
        spec.names.dead_letter_queue = Some(self.dead_letter_queue.clone());
        spec.names.dead_letter_routing_key = Some("dead".into());
    }

    fn spec(&self) -> ConsumerSpec {
        let mut spec = process_job.spec();
        self.configure(&mut spec);
        spec
    }

    fn cleanup(&self) -> Cleanup {
        let mut cleanup = Cleanup::default()
            .exchange(&self.work_exchange)
            .exchange(&self.retry_exchange)
            .exchange(&self.dlx_exchange)
            .queue(&self.work_queue)
            .queue(&self.dead_letter_queue);
        for &ms in &self.delays {
            cleanup = cleanup.queue(&self.retry_queue(ms));
        }
        // The dead-letter index a declaring consumer adds beside its queue.
        for stream in Topology::of(&self.spec()).dead_letter_index.queues() {
            cleanup = cleanup.queue(&stream.name);
        }
        cleanup
    }

    /// Declares the topology with plain client calls and the arguments as the
    /// article declares them: integers as a JavaScript client sends them
    /// (32-bit), and retry queues that dead-letter through the work exchange.
    async fn declare(&self, channel: &Channel) {
        for exchange in [
            &self.work_exchange,
            &self.retry_exchange,
            &self.dlx_exchange,
        ] {
            declare::exchange(channel, exchange, lapin::ExchangeKind::Direct).await;
        }
        let mut queues = vec![(
            self.work_queue.clone(),
            arguments(&[
                ("x-dead-letter-exchange", text(&self.dlx_exchange)),
                ("x-dead-letter-routing-key", text("dead")),
            ]),
        )];
        for &ms in &self.delays {
            queues.push((
                self.retry_queue(ms),
                arguments(&[
                    ("x-message-ttl", AMQPValue::LongInt(ms as i32)),
                    ("x-dead-letter-exchange", text(&self.work_exchange)),
                    ("x-dead-letter-routing-key", text("work")),
                ]),
            ));
        }
        queues.push((self.dead_letter_queue.clone(), FieldTable::default()));
        for (queue, arguments) in queues {
            declare::queue(channel, &queue, arguments).await;
        }
        let mut bindings = vec![(self.work_queue.clone(), &self.work_exchange, "work".into())];
        for &ms in &self.delays {
            bindings.push((
                self.retry_queue(ms),
                &self.retry_exchange,
                self.retry_queue(ms),
            ));
        }
        bindings.push((
            self.dead_letter_queue.clone(),
            &self.dlx_exchange,
            "dead".into(),
        ));
        for (queue, exchange, key) in bindings {
            declare::bind(channel, &queue, exchange, &key).await;
        }
    }
}

/// Whether `queue` exists, asked on a channel of its own.
async fn exists(connection: &Connection, queue: &str) -> bool {
    let probe = connection.create_channel().await.expect("channel");
    declare::try_passive(&probe, queue).await.is_ok()
}

#[tokio::test]
async fn the_articles_own_topology_is_adopted_with_retry_return_exchange() {
    let article = Article::new("article", &[100, 200]);
    let _cleanup = article.cleanup();
    let (connection, channel) = channel().await;
    article.declare(&channel).await;

    // As the default `retry_return` (docs/attributes.md) would have it: the
    // retry queues exist with another route, and start-up says which queue
    // and which argument, in words (what `main` returning the error prints is its Debug form).
    let refused = test_runtime(Journal::default())
        .consumer_with(process_job, |spec| article.configure(spec))
        .run()
        .await;
    match &refused {
        Err(Error::TopologyConflict { name, argument, .. }) => {
            assert_eq!(name, &article.retry_queue(100));
            assert_eq!(argument.as_deref(), Some("x-dead-letter-exchange"));
        }
        other => panic!("expected a topology conflict, got {other:?}"),
    }
    let shown = format!("{refused:?}");
    assert!(
        shown.contains("already exists with a different argument 'x-dead-letter-exchange'")
            && !shown.contains("TopologyConflict {"),
        "{shown}"
    );

    let running = Running::start("article", |spec| {
        article.configure(spec);
        spec.retry_return = RetryReturn::Exchange;
    })
    .await;
    let publisher = publisher().await;
    for job in [
        Job::new(1, Fail::None, None),
        Job::new(2, Fail::Transient, Some(2)),
        Job::new(3, Fail::Transient, None),
        Job::new(4, Fail::Permanent, None),
    ] {
        running.publish(&publisher, &job).await;
    }
    let first = next_message(&channel, &article.dead_letter_queue, WAIT).await;
    let second = next_message(&channel, &article.dead_letter_queue, WAIT).await;
    eventually("job 2 succeeds on its last tier", WAIT, || {
        running.journal.calls_for(2).len() == 3
    })
    .await;

    let journal = &running.journal;
    assert_eq!(journal.calls_for(1).len(), 1, "success: handled once");
    let retried = journal.calls_for(2);
    assert_eq!(
        retried.iter().map(|s| s.retry_count).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    for seen in &retried[1..] {
        // Through the work exchange with the work routing key, not the
        // default exchange: the article's route.
        assert_eq!(
            (seen.exchange.as_str(), seen.routing_key.as_str()),
            (article.work_exchange.as_str(), "work")
        );
    }
    assert!(retried[1].at - retried[0].at >= Duration::from_millis(100));
    assert!(retried[2].at - retried[1].at >= Duration::from_millis(200));

    let mut dead = BTreeMap::new();
    for message in [first, second] {
        let props = &message.delivery.properties;
        let job: Job = serde_json::from_slice(&message.delivery.data).expect("a job");
        dead.insert(
            job.id,
            (
                header_str(props, "x-dead-letter-reason"),
                header_int(props, "x-retry-count"),
            ),
        );
    }
    assert_eq!(
        dead,
        BTreeMap::from([
            (3, (Some("exhausted".into()), Some(2))),
            // No retry tier: a count of 0, written (the article's contract).
            (4, (Some("permanent".into()), Some(0))),
        ])
    );
    assert_eq!(journal.calls_for(3).len(), 3, "exhausted after both tiers");
    assert_eq!(journal.calls_for(4).len(), 1, "permanent: at once");
    for ms in [100, 200] {
        assert_eq!(depth(&channel, &article.retry_queue(ms)).await, 0);
    }
    assert_eq!(depth(&channel, &article.work_queue).await, 0);
    running.stop().await;
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn declare_passive_checks_an_operator_owned_topology_and_names_all_that_is_missing() {
    let article = Article::new("passive", &[100, 200]);
    let _cleanup = article.cleanup();
    let (connection, channel) = channel().await;
    article.declare(&channel).await;

    // Everything exists: the consumer starts and works, declaring nothing.
    let running = Running::start("passive", |spec| {
        article.configure(spec);
        spec.retry_return = RetryReturn::Exchange;
        spec.declare = DeclareMode::Passive;
    })
    .await;
    let publisher = publisher().await;
    running
        .publish(&publisher, &Job::new(1, Fail::Transient, Some(1)))
        .await;
    eventually("a retried job", WAIT, || running.journal.reached(1, 1)).await;
    // Its cleanup (the same names) waits for the end of the test.
    let _stopped = running.stop().await;

    // What a passive check cannot see: queue arguments. The default route
    // passes the check on this topology whose retry queues return through the
    // work exchange.
    rabbit_backoff::topology::check_topology(
        &*framework_connection().await,
        &Topology::of(&article.spec()),
    )
    .await
    .expect("a passive check sees names, not arguments");

    // Two objects gone: start-up names both, at once, and declares nothing.
    channel
        .queue_delete(
            article.retry_queue(200).as_str().into(),
            QueueDeleteOptions::default(),
        )
        .await
        .unwrap();
    channel
        .exchange_delete(
            article.dlx_exchange.as_str().into(),
            ExchangeDeleteOptions::default(),
        )
        .await
        .unwrap();
    let result = test_runtime(Journal::default())
        .consumer_with(process_job, |spec| {
            article.configure(spec);
            spec.retry_return = RetryReturn::Exchange;
            spec.declare = DeclareMode::Passive;
        })
        .run()
        .await;
    match &result {
        Err(e @ Error::TopologyMissing { queue, missing }) => {
            assert_eq!(queue, &article.work_queue);
            assert_eq!(
                missing,
                &[
                    MissingObject::new("exchange", article.dlx_exchange.clone()),
                    MissingObject::new("queue", article.retry_queue(200)),
                ]
            );
            let message = e.to_string();
            assert!(
                message.contains("2 of its objects do not exist")
                    && message.contains(&article.dlx_exchange)
                    && message.contains(&article.retry_queue(200)),
                "{message}"
            );
        }
        other => panic!("expected the missing objects, got {other:?}"),
    }
    assert!(
        !exists(&connection, &article.retry_queue(200)).await,
        "a passive consumer declared nothing"
    );
    let _ = connection.close(200, "".into()).await;
}

#[test]
fn concurrency_follows_a_prefetch_changed_at_start_up() {
    let spec = |configure: fn(&mut ConsumerSpec)| {
        Runtime::builder()
            .state(Journal::default())
            .consumer_with(process_job, configure)
            .build()
            .expect("valid")
            .specs()
            .next()
            .cloned()
            .expect("one consumer")
    };
    assert_eq!(spec(|s| s.prefetch = 20).effective_concurrency(), 20);
    let explicit = spec(|s| {
        s.prefetch = 20;
        s.concurrency = Some(5);
    });
    assert_eq!(explicit.effective_concurrency(), 5);
    let broadcast = Runtime::builder()
        .state(Journal::default())
        .consumer_with(process_job, |s| {
            s.exchange_kind = rabbit_backoff::ExchangeKind::Fanout;
            s.retry_return = RetryReturn::Exchange;
        })
        .build();
    let message = broadcast.err().expect("refused").to_string();
    assert!(
        message.contains("fanout") && message.contains("retry_return = \"queue\""),
        "{message}"
    );
}

// ---- a mixed fleet ----

/// Who handled a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    Framework,
    Article,
}

/// The article's consumer loop, written by hand with lapin as its Node
/// original is: on failure, republish to `retry_exchange` with the retry
/// queue's name as routing key and `x-retry-count + 1`; once every tier is
/// used, or on a permanent error, publish to `dlx_exchange` with key `dead`,
/// `x-error` and `x-failed-at` as JavaScript's `toISOString()` writes it, and
/// no `x-dead-letter-reason`; then ack. It writes the count with whatever
/// integer width, as clients differ.
async fn article_loop(
    connection: Connection,
    article: Arc<Article>,
    calls: Arc<Mutex<Vec<(u64, u32, By)>>>,
) {
    let channel = connection.create_channel().await.expect("channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    channel
        .basic_qos(10, BasicQosOptions::default())
        .await
        .expect("qos");
    let mut deliveries = channel
        .basic_consume(
            article.work_queue.as_str().into(),
            "article-loop".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let mut n: u64 = 0;
    while let Some(Ok(delivery)) = deliveries.next().await {
        n += 1;
        let job: Job = serde_json::from_slice(&delivery.data).expect("a job");
        let count = header_int(&delivery.properties, "x-retry-count")
            .unwrap_or(0)
            .max(0) as u32;
        calls.lock().unwrap().push((job.id, count, By::Article));
        let width = |c: u32| match n % 3 {
            0 => AMQPValue::LongInt(c as i32),
            1 => AMQPValue::ShortShortUInt(c as u8),
            _ => AMQPValue::LongLongInt(c.into()),
        };
        let mut headers = delivery.properties.headers().clone().unwrap_or_default();
        let target = match job.verdict(count) {
            Verdict::Ok => None,
            Verdict::Transient if (count as usize) < article.delays.len() => {
                headers.insert("x-retry-count".into(), width(count + 1));
                let queue = article.retry_queue(article.delays[count as usize]);
                Some((article.retry_exchange.clone(), queue))
            }
            verdict => {
                headers.insert("x-retry-count".into(), width(count));
                let error = format!("article: job {} failed ({verdict:?})", job.id);
                headers.insert("x-error".into(), AMQPValue::LongString(error.into()));
                let failed_at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
                headers.insert(
                    "x-failed-at".into(),
                    AMQPValue::LongString(failed_at.into()),
                );
                Some((article.dlx_exchange.clone(), "dead".to_owned()))
            }
        };
        if let Some((exchange, key)) = target {
            let mut properties = BasicProperties::default()
                .with_delivery_mode(2)
                .with_content_type("application/json".into())
                .with_headers(headers);
            if let Some(id) = delivery.properties.message_id() {
                properties = properties.with_message_id(id.clone());
            }
            let confirm = channel
                .basic_publish(
                    exchange.as_str().into(),
                    key.as_str().into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    &delivery.data,
                    properties,
                )
                .await
                .expect("publish")
                .await
                .expect("confirm");
            assert!(confirm.is_ack(), "the broker took the article's copy");
            assert!(confirm.take_message().is_none(), "routed");
        }
        delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .expect("ack");
    }
}

/// The 2000 jobs: half succeed at once, three in ten succeed on a retry, one in
/// ten is exhausted, one in ten is permanent.
fn mixed_jobs() -> Vec<Job> {
    (0..2000u64)
        .map(|id| match id % 10 {
            0..=4 => Job::new(id, Fail::None, None),
            5 | 7 => Job::new(id, Fail::Transient, Some(1)),
            6 => Job::new(id, Fail::Transient, Some(2)),
            8 => Job::new(id, Fail::Transient, None),
            _ => Job::new(id, Fail::Permanent, None),
        })
        .collect()
}

async fn mixed_fleet(route: RetryReturn) {
    let article = Arc::new(Article::new("mixed", &[50, 100]));
    let _cleanup = article.cleanup();
    let (connection, channel) = channel().await;
    if route == RetryReturn::Exchange {
        article.declare(&channel).await;
    }
    // With the queue route the framework declares the topology, and the
    // article's loop works on it unchanged: it only publishes by name.
    let running = Running::start("mixed", |spec| {
        article.configure(spec);
        spec.retry_return = route;
        // The article loop's window, so that both take a share.
        spec.prefetch = 10;
    })
    .await;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let loop_connection = connect().await;
    let old = tokio::spawn(article_loop(
        loop_connection,
        Arc::clone(&article),
        Arc::clone(&calls),
    ));

    let jobs = mixed_jobs();
    let started = Instant::now();
    let since = SystemTime::now() - Duration::from_secs(1);
    let publisher = publisher().await;
    for chunk in jobs.chunks(100) {
        let sends = chunk.iter().map(|job| {
            publisher.publish(
                &article.work_exchange,
                "work",
                rabbit_backoff::Outgoing::json(job)
                    .expect("json")
                    .message_id(format!("job-{}", job.id)),
            )
        });
        for sent in futures_util::future::join_all(sends).await {
            sent.expect("published");
        }
    }

    let expected_dead: BTreeSet<u64> = jobs
        .iter()
        .filter(|j| j.verdict(article.delays.len() as u32) != Verdict::Ok)
        .map(|j| j.id)
        .collect();
    let expected_ok: BTreeSet<u64> = jobs
        .iter()
        .map(|j| j.id)
        .filter(|id| !expected_dead.contains(id))
        .collect();
    let journal = running.journal.clone();
    let all_calls = || {
        let mut all = calls.lock().unwrap().clone();
        all.extend(
            journal
                .calls()
                .into_iter()
                .map(|s| (s.id, s.retry_count, By::Framework)),
        );
        all
    };
    let succeeded = |all: &[(u64, u32, By)]| -> Vec<u64> {
        all.iter()
            .filter(|(id, count, _)| jobs[*id as usize].verdict(*count) == Verdict::Ok)
            .map(|(id, _, _)| *id)
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = succeeded(&all_calls()).len() >= expected_ok.len()
            && depth(&channel, &article.dead_letter_queue).await as usize >= expected_dead.len();
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not settled within 60 s: {} of {} succeeded, {} of {} dead-lettered",
            succeeded(&all_calls()).len(),
            expected_ok.len(),
            depth(&channel, &article.dead_letter_queue).await,
            expected_dead.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    // Nothing else is on its way: every retry tier and the work queue are empty.
    for &ms in &article.delays {
        assert_eq!(depth(&channel, &article.retry_queue(ms)).await, 0);
    }
    assert_eq!(depth(&channel, &article.work_queue).await, 0);
    let _stopped = running.stop().await;
    old.abort();

    // Every id accounted for, once: succeeded or dead-lettered.
    let all = all_calls();
    let mut ok = succeeded(&all);
    ok.sort_unstable();
    assert_eq!(
        ok,
        expected_ok.iter().copied().collect::<Vec<_>>(),
        "each success handled exactly once"
    );
    let dlq = Dlq::connect(&url(), &article.spec()).await.expect("dlq");
    let peeked = dlq.peek(&DeadLetterFilter::default()).await.expect("peek");
    let mut dead: Vec<u64> = peeked
        .matched
        .iter()
        .map(|m| {
            serde_json::from_str::<Job>(&m.body_preview)
                .expect("a job")
                .id
        })
        .collect();
    dead.sort_unstable();
    assert_eq!(
        dead,
        expected_dead.iter().copied().collect::<Vec<_>>(),
        "each failure dead-lettered exactly once"
    );

    // Both consumers settled messages, including each other's.
    let by = |who: By| all.iter().filter(|(_, _, b)| *b == who).count();
    let mut handlers: BTreeMap<u64, BTreeSet<u8>> = BTreeMap::new();
    for (id, _, who) in &all {
        handlers.entry(*id).or_default().insert(*who as u8);
    }
    let shared = handlers.values().filter(|h| h.len() == 2).count();
    let article_letters = peeked.matched.iter().filter(|m| m.reason.is_none()).count();
    let framework_letters = peeked.matched.len() - article_letters;
    println!(
        "{route:?} route: {} jobs settled in {elapsed:?}; calls: framework {}, article {}; {shared} jobs handled by both; dead letters: framework {framework_letters}, article {article_letters}",
        jobs.len(),
        by(By::Framework),
        by(By::Article),
    );
    assert!(
        by(By::Framework) > 300 && by(By::Article) > 300,
        "both consumed"
    );
    assert!(
        shared > 50,
        "retries crossed between the consumers: {shared}"
    );
    assert!(article_letters > 0 && framework_letters > 0);

    // The article's dead letters, as peek, status and replay see them.
    for m in &peeked.matched {
        let failed_at = m.failed_at.as_deref().expect("x-failed-at");
        assert!(
            parse_failed_at(failed_at).is_some_and(|t| t >= since),
            "{failed_at}"
        );
        match &m.reason {
            None => assert!(
                m.error
                    .as_deref()
                    .is_some_and(|e| e.starts_with("article:"))
            ),
            Some(reason) => assert!(["exhausted", "permanent"].contains(&reason.as_str())),
        }
    }
    let recent = DeadLetterFilter::default().after(since);
    assert_eq!(
        dlq.peek(&recent).await.expect("peek").matched.len(),
        expected_dead.len(),
        "JavaScript timestamps filter like the framework's"
    );
    let status = rabbit_backoff::status(
        &*framework_connection().await,
        &article.spec().names(),
        &article.delays,
        &[],
    )
    .await
    .expect("status");
    assert_eq!(status.dead_letters() as usize, expected_dead.len());
    let theirs = DeadLetterFilter::default()
        .error("^article:")
        .expect("regex");
    let replayed = dlq
        .replay(&theirs, &ReplayOptions::default())
        .await
        .expect("replay");
    assert_eq!(replayed.matched.len(), article_letters);
    assert_eq!(replayed.kept, framework_letters);
    assert_eq!(
        depth(&channel, &article.work_queue).await as usize,
        article_letters,
        "replayed to the work queue"
    );
    let back = next_message(&channel, &article.work_queue, WAIT).await;
    assert_eq!(
        header_int(&back.delivery.properties, "x-retry-count"),
        Some(0)
    );
    let Some(AMQPValue::FieldArray(history)) =
        header(&back.delivery.properties, "x-replay-history")
    else {
        panic!("a replay history")
    };
    let Some(AMQPValue::FieldTable(entry)) = history.as_slice().first() else {
        panic!("one entry")
    };
    assert!(entry.inner().contains_key("x-failed-at"));
    assert!(!entry.inner().contains_key("x-dead-letter-reason"));
    dlq.close().await;
    let _ = connection.close(200, "".into()).await;
}

#[tokio::test]
async fn a_mixed_fleet_settles_each_others_messages_through_the_work_exchange() {
    mixed_fleet(RetryReturn::Exchange).await;
}

#[tokio::test]
async fn a_mixed_fleet_settles_each_others_messages_through_the_default_exchange() {
    mixed_fleet(RetryReturn::Queue).await;
}
