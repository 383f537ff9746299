//! What the console's tests share: a console served as `rabbit-backoff
//! console` serves it, over the test broker; the dead letters they put in
//! its queues; requests to its API; scripts that read its page.
//!
//! Needs RabbitMQ with its management API (scripts/ensure-broker.sh) and
//! /usr/bin/chromium with /usr/bin/chromedriver (scripts/browser.sh); both
//! are installed and started by scripts/test.sh.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use fantoccini::Locator;
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff::console::{AuditLog, ConsoleBuilder, DEFAULT_OPERATOR, Tokens};
use rabbit_backoff_test_support::broker::{connect, management_url, stream_port, url};
use rabbit_backoff_test_support::browser::Browser;
use rabbit_backoff_test_support::dead_letter_fixture::{
    DeadLetter, Fixture, long_string, publish_to_queue,
};
use rabbit_backoff_test_support::declare;
use serde_json::Value;

/// The token of the console's operator.
pub const TOKEN: &str = "console-test-token-0123456789";

/// A console served on a free port of 127.0.0.1, as `rabbit-backoff
/// console` serves it (the router on a runtime of its own, the names of the
/// address it listens on allowed), with the token [`TOKEN`] of the
/// operator and an audit log; stopped when dropped.
pub struct Console {
    /// `http://127.0.0.1:<port>/`
    pub url: String,
    /// Its audit log (a temporary file, removed when dropped).
    pub audit: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl Console {
    /// A console over the test broker.
    pub fn start() -> Console {
        Console::start_with(|console| console)
    }

    /// A console over the test broker, built further by `configure`.
    pub fn start_with(configure: impl FnOnce(ConsoleBuilder) -> ConsoleBuilder) -> Console {
        let audit = std::env::temp_dir().join(format!(
            "rbt-console-audit-{}.jsonl",
            &uuid::Uuid::new_v4().simple().to_string()[..10]
        ));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let console = rabbit_backoff::console::Console::builder(url())
            .management_url(management_url())
            .stream_port(stream_port())
            .tokens(Tokens::parse(&format!("{DEFAULT_OPERATOR}:{TOKEN}")).unwrap())
            .allowed_hosts([address.to_string(), format!("localhost:{}", address.port())])
            .audit_log(AuditLog::open(audit.clone()).unwrap());
        let router = configure(console).build().expect("a console").router();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tokio::select! {
                    served = axum::serve(listener, router) => served.unwrap(),
                    _ = stopped => {}
                }
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
        });
        Console {
            url: format!("http://{address}/"),
            audit,
            stop: Some(stop),
            server: Some(server),
        }
    }

    pub fn host(&self) -> &str {
        self.url.trim_start_matches("http://").trim_end_matches('/')
    }

    pub fn origin(&self) -> String {
        format!("http://{}", self.host())
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
        let _ = std::fs::remove_file(&self.audit);
    }
}

/// The groups the page shows: id, count, reason, error fingerprint, and
/// whether the row has write buttons.
pub const GROUPS: &str = "return [...document.querySelectorAll('#groups tbody tr')].map(r => ({
    id: r.dataset.group,
    count: r.querySelector('.count').textContent,
    reason: r.querySelector('.reason').textContent,
    fingerprint: r.querySelector('.fingerprint').textContent,
    writes: r.querySelectorAll('button.write').length,
}))";

pub fn group<'a>(groups: &'a Value, fingerprint: &str) -> &'a Value {
    groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["fingerprint"] == fingerprint)
        .unwrap_or_else(|| panic!("no group {fingerprint:?} among {groups}"))
}

/// A script that returns the consumer row's work and DLQ depths once they are
/// `work` and `dlq`.
pub fn depths_are(queue: &str, work: u32, dlq: u32) -> String {
    format!(
        "const r = [...document.querySelectorAll('#consumers tbody tr')].find(r => r.dataset.queue === {queue:?});
         return !!r && r.querySelector('.work').textContent === '{work}' && r.querySelector('.dlq').textContent === '{dlq}';"
    )
}

pub const HOSTILE_BODY: &str = "<script>document.title='pwned';window.pwned=true</script>";

pub const HOSTILE_ERROR: &str = "<img src=x onerror=\"document.title='pwned';window.pwned=true\">";

pub fn letter(id: &'static str, error: &str, reason: &'static str, body: &str) -> DeadLetter {
    DeadLetter {
        id,
        error: error.to_owned(),
        reason,
        retry_count: if reason == "exhausted" { 2 } else { 0 },
        body: body.to_owned(),
        headers: Vec::new(),
        failed_at: "2026-12-02T10:40:07.121Z".to_owned(),
    }
}

pub fn letters() -> Vec<DeadLetter> {
    let database = |id| letter(id, "database unavailable", "exhausted", "{\"order\":1}");
    vec![
        database("db-1"),
        letter(
            "order-17",
            "order 17 not found",
            "permanent",
            "{\"order\":17}",
        ),
        database("db-2"),
        letter(
            "order-42",
            "order 42 not found",
            "permanent",
            "{\"order\":42}",
        ),
        database("db-3"),
        letter("hostile", HOSTILE_ERROR, "decode", HOSTILE_BODY),
    ]
}

/// An HTTP response's status, headers and body, without treating 4xx as errors.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent()
}

/// POSTs `body` to a write endpoint with these headers; the status and body.
pub fn post(
    console: &Console,
    action: &str,
    queue: &str,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = agent().post(format!("{}api/consumers/{queue}/{action}", console.url));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request
        .send(r#"{"message_id":"db-1"}"#)
        .expect("the console answers");
    let status = response.status().as_u16();
    let body = response.body_mut().read_json().unwrap_or(Value::Null);
    (status, body)
}

/// The status line of a GET sent with this `Host` header.
pub fn status_with_host(console: &Console, host: &str) -> String {
    let response = rabbit_backoff_test_support::http::get(console.host(), "/api/config", host, "");
    response.lines().next().unwrap_or_default().to_owned()
}

/// A GET of the API with these headers: status and body.
pub fn get(console: &Console, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = agent().get(format!("{}{path}", console.url));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.call().expect("the console answers");
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

/// POSTs `body` (JSON) to `action` of `queue` with these headers.
pub fn post_json(
    console: &Console,
    action: &str,
    queue: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let mut request = agent().post(format!("{}api/consumers/{queue}/{action}", console.url));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.send(body).expect("the console answers");
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

pub const ALICE: &str = "alice-token-0123456789abcdef";

/// The page is no wider than a 1400 px window.
pub const FITS: &str = "return document.documentElement.scrollWidth <= window.innerWidth
    ? true : document.documentElement.scrollWidth + ' > ' + window.innerWidth;";

pub async fn fits(b: &Browser, what: &str) {
    assert_eq!(
        b.eval(FITS).await,
        Value::Bool(true),
        "{what}: wider than the window"
    );
}

/// The messages the page lists: their ids.
pub const LISTED: &str =
    "return [...document.querySelectorAll('#messages tbody tr')].map(r => r.dataset.messageId)";

/// What these tests do to a fixture's queues besides what the shared
/// fixture does: take the work queue, put messages in a retry tier, write
/// past the dead-letter index.
pub trait FixtureQueues {
    /// Takes every message of the work queue: id, body, headers.
    async fn take_from_work_queue(&self) -> Vec<(String, Vec<u8>, BTreeMap<String, AMQPValue>)>;
    /// Puts a message in the retry tier of `delay_ms` as the framework
    /// does, with `x-retried-at` when given.
    async fn wait_in_tier(&self, delay_ms: u64, id: &str, entered: Option<&str>);
    /// Messages in the retry tier of `delay_ms`.
    async fn tier_depth(&self, delay_ms: u64) -> u32;
    /// Publishes a dead letter straight to the DLQ, past its dead-letter
    /// exchange: the dead-letter index has no entry for it, and no longer
    /// counts what the queue holds.
    async fn bypass_the_index(&self, id: &str, error: &str);
}

impl FixtureQueues for Fixture {
    async fn take_from_work_queue(&self) -> Vec<(String, Vec<u8>, BTreeMap<String, AMQPValue>)> {
        let connection = connect().await;
        let channel = connection.create_channel().await.unwrap();
        let mut taken = Vec::new();
        while let Some(message) = channel
            .basic_get(
                self.queue().into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
            .unwrap()
        {
            let properties = &message.delivery.properties;
            taken.push((
                properties
                    .message_id()
                    .as_ref()
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
                message.delivery.data.clone(),
                properties
                    .headers()
                    .as_ref()
                    .map(|h| {
                        h.inner()
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default(),
            ));
        }
        let _ = connection.close(200, "".into()).await;
        taken
    }

    async fn wait_in_tier(&self, delay_ms: u64, id: &str, entered: Option<&str>) {
        let mut headers = FieldTable::default();
        headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(1));
        if let Some(entered) = entered {
            headers.insert("x-retried-at".into(), long_string(entered));
        }
        let tier = self.spec.names().retry_queue(delay_ms);
        publish_to_queue(&tier, id, b"{\"order\":99}", headers).await;
    }

    async fn tier_depth(&self, delay_ms: u64) -> u32 {
        let connection = connect().await;
        let channel = connection.create_channel().await.unwrap();
        let depth = declare::passive(&channel, &self.spec.names().retry_queue(delay_ms))
            .await
            .message_count();
        let _ = connection.close(200, "".into()).await;
        depth
    }

    async fn bypass_the_index(&self, id: &str, error: &str) {
        let mut headers = FieldTable::default();
        headers.insert("x-error".into(), long_string(error));
        headers.insert("x-dead-letter-reason".into(), long_string("permanent"));
        headers.insert(
            "x-failed-at".into(),
            long_string("2026-12-02T10:40:07.121Z"),
        );
        let dlq = &self.spec.names().dead_letter_queue;
        publish_to_queue(dlq, id, b"{}", headers).await;
    }
}

/// The texts the line under the groups has shown since the script ran.
pub const WATCH_SOURCE: &str = "const line = document.getElementById('groups-source');
    window.sources = [line.textContent];
    new MutationObserver(() => window.sources.push(line.textContent))
        .observe(line, { childList: true, characterData: true, subtree: true });
    return true;";

/// An error of 4 KB without a break.
pub fn wide_error() -> String {
    format!("E{}", "x".repeat(4096))
}

/// The dead letters of the page's sessions, failed over the last two hours:
/// the 4 KB error, five orders of tenant 7 and two of tenant 9 (rejected,
/// the tenant in the body), and a message to fix (headers `tenant` and
/// `debug`).
pub fn tenant_letters() -> Vec<DeadLetter> {
    let mut dead_letters = vec![letter("wide", &wide_error(), "exhausted", "{}")];
    for (id, n) in [
        ("t7-1", 1),
        ("t7-2", 2),
        ("t7-3", 3),
        ("t7-4", 4),
        ("t7-5", 5),
    ] {
        // The tenant sits far past the 200 bytes of a summary's preview.
        let body = format!(
            "{{\"order\":{n},\"pad\":\"{}\",\"tenant\":\"Tenant-7\"}}",
            "p".repeat(300)
        );
        dead_letters.push(letter(
            id,
            &format!("order {n} rejected"),
            "permanent",
            &body,
        ));
    }
    for (id, n) in [("t9-1", 11), ("t9-2", 12)] {
        let body = format!("{{\"order\":{n},\"tenant\":\"tenant-9\"}}");
        dead_letters.push(letter(
            id,
            &format!("order {n} rejected"),
            "permanent",
            &body,
        ));
    }
    let mut fix_me = letter(
        "fix-me",
        "unknown sku BAD",
        "permanent",
        "{\"sku\":\"BAD\"}",
    );
    fix_me.headers = vec![("tenant", "acme"), ("debug", "yes")];
    dead_letters.push(fix_me);
    // Failures spread over the last two hours, for the chart.
    let now = std::time::SystemTime::now();
    for (i, letter) in dead_letters.iter_mut().enumerate() {
        let ago = Duration::from_secs(60 * (7 + 13 * i as u64));
        letter.failed_at = humantime::format_rfc3339_millis(now - ago).to_string();
    }
    dead_letters
}

/// Alice's session in a 1400 px window, over a consumer with a 60 s and a
/// 10 min tier and these dead letters; the console knows alice, bob and
/// the operator.
pub struct Session {
    /// The consumer's queues.
    pub f: Fixture,
    /// Its work queue.
    pub queue: String,
    /// The console.
    pub console: Console,
    /// The browser, on the console's page with alice's token.
    pub browser: Browser,
}

/// Opens [`Session`] over the queues named after `name`.
pub async fn alice_session(name: &str, dead_letters: &[DeadLetter]) -> Session {
    let f = Fixture::with_delays(name, "60s,10m", dead_letters).await;
    let queue = f.queue().to_owned();
    let tokens = format!("alice:{ALICE},bob:bob-token-0123456789abcdef00");
    let console = Console::start_with(|console| {
        console.tokens(Tokens::parse(&format!("{tokens},{DEFAULT_OPERATOR}:{TOKEN}")).unwrap())
    });
    let browser = Browser::start().await;
    browser.client.set_window_size(1400, 1000).await.unwrap();
    browser
        .client
        .goto(&format!("{}#token={ALICE}", console.url))
        .await
        .expect("open the console");
    Session {
        f,
        queue,
        console,
        browser,
    }
}

/// Opens the dead letters of `queue`, which fall in three groups: the
/// groups.
pub async fn open_three_groups(b: &Browser, queue: &str) -> Value {
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    b.until(
        "three groups",
        &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 3 ? g : null;"),
    )
    .await
}

/// Types `text` into a new search and runs it.
pub async fn search_for(b: &Browser, text: &str) {
    b.click("#search-clear").await;
    b.client
        .find(Locator::Css("#search-text"))
        .await
        .unwrap()
        .send_keys(text)
        .await
        .unwrap();
    b.click("#search-go").await;
}

/// `n` dead letters of one group (`error`), ids `<prefix>-1` to
/// `<prefix>-n`.
pub fn many_letters(prefix: &str, n: usize, error: &str) -> Vec<DeadLetter> {
    (1..=n)
        .map(|i| {
            let id: &'static str = Box::leak(format!("{prefix}-{i}").into_boxed_str());
            letter(id, error, "exhausted", &format!("{{\"order\":{i}}}"))
        })
        .collect()
}

/// The headers of a write from the console's own page with `token`.
pub fn write_headers<'a>(origin: &'a str, bearer: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("Origin", origin),
        ("Content-Type", "application/json"),
        ("Authorization", bearer),
    ]
}

/// Asks the API for `path` until `ready` returns something, for at most
/// `within`; fails the test with the last answer then.
pub async fn api_until<T>(
    console: &Console,
    path: &str,
    what: &str,
    within: Duration,
    mut ready: impl FnMut(&Value) -> Option<T>,
) -> T {
    let started = std::time::Instant::now();
    loop {
        let (status, body) = get(console, path, &[]);
        if status == 200
            && let Some(value) = ready(&body)
        {
            return value;
        }
        assert!(
            started.elapsed() < within,
            "{what}: not within {within:?}; the last answer: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
