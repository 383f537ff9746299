//! The web console (`rabbit-backoff console`) against the real broker: its
//! page in a real headless Chromium driven through chromedriver, its guard
//! with a plain HTTP client.
//!
//! Needs RabbitMQ with its management API (scripts/ensure-broker.sh) and
//! /usr/bin/chromium with /usr/bin/chromedriver (scripts/browser.sh); both
//! are installed and started by scripts/test.sh.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::Locator;
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff_test_support::broker::{connect, url};
use rabbit_backoff_test_support::browser::Browser;
use rabbit_backoff_test_support::dead_letter_fixture::{
    DeadLetter, Fixture, long_string, publish_to_queue,
};
use serde_json::{Value, json};

const TOKEN: &str = "console-test-token-0123456789";

/// `rabbit-backoff console` on a free port with a known token; killed when dropped.
struct Console {
    child: Child,
    /// `http://127.0.0.1:<port>/`
    url: String,
    /// Its audit log (a temporary file, removed when dropped).
    audit: std::path::PathBuf,
}

impl Console {
    fn start(extra: &[&str]) -> Console {
        Console::start_with(extra, &[])
    }

    /// With these environment variables too.
    fn start_with(extra: &[&str], env: &[(&str, &str)]) -> Console {
        let audit = std::env::temp_dir().join(format!(
            "rbt-console-audit-{}.jsonl",
            &uuid::Uuid::new_v4().simple().to_string()[..10]
        ));
        let mut command = Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"));
        command
            .args(["console", "--listen", "127.0.0.1:0"])
            .arg("--audit-log")
            .arg(&audit)
            .args(extra)
            .env("AMQP_URL", url())
            .env("RABBIT_BACKOFF_CONSOLE_TOKEN", TOKEN);
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("start rabbit-backoff console");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout
            .read_line(&mut first)
            .expect("read the console's address");
        // The rest, read so that the console never writes to a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = first
            .trim()
            .strip_prefix("rabbit-backoff console: ")
            .unwrap_or_else(|| panic!("the console printed {first:?}, not its address"))
            .to_owned();
        Console { child, url, audit }
    }

    fn host(&self) -> &str {
        self.url.trim_start_matches("http://").trim_end_matches('/')
    }

    fn origin(&self) -> String {
        format!("http://{}", self.host())
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.audit);
    }
}

/// The groups the page shows: id, count, reason, error fingerprint, and
/// whether the row has write buttons.
const GROUPS: &str = "return [...document.querySelectorAll('#groups tbody tr')].map(r => ({
    id: r.dataset.group,
    count: r.querySelector('.count').textContent,
    reason: r.querySelector('.reason').textContent,
    fingerprint: r.querySelector('.fingerprint').textContent,
    writes: r.querySelectorAll('button.write').length,
}))";

fn group<'a>(groups: &'a Value, fingerprint: &str) -> &'a Value {
    groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["fingerprint"] == fingerprint)
        .unwrap_or_else(|| panic!("no group {fingerprint:?} among {groups}"))
}

/// A script that returns the consumer row's work and DLQ depths once they are
/// `work` and `dlq`.
fn depths_are(queue: &str, work: u32, dlq: u32) -> String {
    format!(
        "const r = [...document.querySelectorAll('#consumers tbody tr')].find(r => r.dataset.queue === {queue:?});
         return !!r && r.querySelector('.work').textContent === '{work}' && r.querySelector('.dlq').textContent === '{dlq}';"
    )
}

const HOSTILE_BODY: &str = "<script>document.title='pwned';window.pwned=true</script>";
const HOSTILE_ERROR: &str = "<img src=x onerror=\"document.title='pwned';window.pwned=true\">";

fn letter(id: &'static str, error: &str, reason: &'static str, body: &str) -> DeadLetter {
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

fn letters() -> Vec<DeadLetter> {
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

/// One browser session: the groups of a DLQ, a hostile message shown as
/// text, a dismissed confirmation that changes nothing, a replay refused
/// with a wrong token from the URL fragment, the group replayed with the
/// token typed in, a read-only console without write buttons, and a broker
/// error shown in the page.
#[tokio::test]
async fn the_page_groups_dead_letters_shows_hostile_ones_as_text_and_replays_a_group() {
    let f = Fixture::new("console.page", &letters()).await;
    let queue = f.queue().to_owned();
    let console = Console::start(&[]);
    let browser = Browser::start().await;
    let b = &browser;
    // A token in the fragment is taken, and leaves the address bar; this
    // one is wrong.
    b.client
        .goto(&format!("{}#token=not-the-console-token-0000", console.url))
        .await
        .expect("open the console");
    b.until(
        "the fragment's token taken",
        "return location.hash === '' && document.getElementById('token-state').textContent === 'token set';",
    )
    .await;

    // The consumer, found through the management API, with its depths.
    b.until(
        "the consumer with 6 dead letters",
        &depths_are(&queue, 0, 6),
    )
    .await;
    let tiers = b
        .text(&format!("#consumers tr[data-queue=\"{queue}\"] .tiers"))
        .await;
    assert!(
        tiers.contains(&format!("{queue}.retry_1000ms: 0"))
            && tiers.contains(&format!("{queue}.retry_2000ms: 0")),
        "{tiers}"
    );

    // Its dead letters in three groups.
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    let groups = b
        .until(
            "three groups",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 3 ? g : null;"),
        )
        .await;
    let database = group(&groups, "database unavailable");
    assert_eq!(database["count"], "3");
    assert_eq!(database["reason"], "exhausted");
    assert_eq!(database["writes"], 2, "replay and discard");
    let orders = group(&groups, "order <n> not found");
    assert_eq!(orders["count"], "2");
    assert_eq!(orders["reason"], "permanent");
    let hostile = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["reason"] == "decode")
        .expect("the hostile message's group");

    // The hostile message: its body and error are shown as text, and
    // nothing in them ran.
    b.click(&format!(
        "#groups tr[data-group=\"{}\"] button.messages",
        hostile["id"].as_str().unwrap()
    ))
    .await;
    b.show_message("hostile").await;
    assert_eq!(b.text("#message-body").await, HOSTILE_BODY);
    assert_eq!(b.text("#message-error").await, HOSTILE_ERROR);
    let ran = b
        .eval(
            "return {
                title: document.title,
                pwned: typeof window.pwned,
                elements: document.querySelectorAll('main img, main script').length,
            }",
        )
        .await;
    assert_eq!(
        ran,
        json!({"title": "rabbit-backoff console", "pwned": "undefined", "elements": 0})
    );

    // A dismissed confirmation changes nothing.
    let database_id = database["id"].as_str().unwrap().to_owned();
    b.click(&format!(
        "#groups tr[data-group=\"{database_id}\"] button.discard"
    ))
    .await;
    let question = b.confirmation().await;
    assert!(question.contains("Discard the 3 message(s)"), "{question}");
    b.client.dismiss_alert().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        f.depths().await,
        (0, 6),
        "a dismissed discard removed messages"
    );

    // With the fragment's wrong token, the confirmed replay is refused and
    // the page says so.
    b.click(&format!(
        "#groups tr[data-group=\"{database_id}\"] button.replay"
    ))
    .await;
    b.confirmation().await;
    b.client.accept_alert().await.unwrap();
    let error = b
        .until(
            "the refusal",
            "const e = document.getElementById('error'); return e.hidden ? null : e.textContent;",
        )
        .await;
    assert_eq!(error, "Replay refused or failed: wrong token");
    assert_eq!(f.depths().await, (0, 6), "a refused replay moved messages");

    // The right token typed in.
    b.client
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    b.click("#token-save").await;

    // The group replayed after the confirmation.
    b.click(&format!(
        "#groups tr[data-group=\"{database_id}\"] button.replay"
    ))
    .await;
    let question = b.confirmation().await;
    assert!(
        question.contains("Replay the 3 message(s)") && question.contains(&queue),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    let notice = b
        .until(
            "the replay's outcome",
            "const n = document.getElementById('notice'); return n.hidden ? null : n.textContent;",
        )
        .await;
    assert!(
        notice
            .as_str()
            .unwrap()
            .starts_with("Replayed 3 message(s); 3 left"),
        "{notice}"
    );
    let groups = b
        .until(
            "the replayed group gone",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 2 ? g : null;"),
        )
        .await;
    assert!(
        groups
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["id"] != database_id.as_str()),
        "{groups}"
    );
    assert_eq!(f.depths().await, (3, 3), "the broker: work queue, DLQ");
    assert!(
        b.client
            .find(Locator::Css("#error"))
            .await
            .unwrap()
            .attr("hidden")
            .await
            .unwrap()
            .is_some(),
        "the refusal's message is gone"
    );
    b.until(
        "the work queue holding the 3 replayed messages and the DLQ 3",
        &depths_are(&queue, 3, 3),
    )
    .await;

    // A read-only console offers no write.
    let read_only = Console::start(&["--read-only"]);
    b.client.goto(&read_only.url).await.unwrap();
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    let groups = b
        .until(
            "the groups in read-only mode",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 2 ? g : null;"),
        )
        .await;
    assert!(
        groups.as_array().unwrap().iter().all(|g| g["writes"] == 0),
        "{groups}"
    );
    assert_eq!(b.text("#mode").await, "read-only");
    assert!(
        !b.client
            .find(Locator::Css("#token-form"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap(),
        "a read-only console asks for no token"
    );

    // A broker error comes back as JSON and shows in the page.
    let unreachable = Console::start(&["--management", "http://127.0.0.1:1"]);
    b.client.goto(&unreachable.url).await.unwrap();
    let error = b
        .until(
            "the management API's error",
            "const e = document.getElementById('error'); return e.hidden ? null : e.textContent;",
        )
        .await;
    assert!(
        error
            .as_str()
            .unwrap()
            .starts_with("Consumers: the broker: http://127.0.0.1:1"),
        "{error}"
    );
    browser.close().await;
}

/// An HTTP response's status, headers and body, without treating 4xx as errors.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent()
}

/// POSTs `body` to a write endpoint with these headers; the status and body.
fn post(console: &Console, action: &str, queue: &str, headers: &[(&str, &str)]) -> (u16, Value) {
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
fn status_with_host(console: &Console, host: &str) -> String {
    let mut stream = TcpStream::connect(console.host()).unwrap();
    write!(
        stream,
        "GET /api/config HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_write_needs_the_token_the_consoles_own_origin_and_json() {
    let f = Fixture::new("console.guard", &letters()[..1]).await;
    let console = Console::start(&[]);
    let origin = console.origin();
    let bearer = format!("Bearer {TOKEN}");
    let queue = f.queue().to_owned();
    let refused = |headers: &[(&str, &str)]| post(&console, "replay", &queue, headers);

    let (status, body) = refused(&[("Origin", &origin), ("Content-Type", "application/json")]);
    assert_eq!(status, 401, "no token: {body}");
    assert!(body["error"].as_str().unwrap().contains("token"), "{body}");
    let (status, _) = refused(&[
        ("Origin", &origin),
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer not-the-token-at-all"),
    ]);
    assert_eq!(status, 401, "a wrong token");
    let (status, body) = refused(&[
        ("Origin", "http://evil.example"),
        ("Content-Type", "application/json"),
        ("Authorization", &bearer),
    ]);
    assert_eq!(status, 403, "a foreign origin: {body}");
    let (status, _) = refused(&[
        ("Sec-Fetch-Site", "cross-site"),
        ("Content-Type", "application/json"),
        ("Authorization", &bearer),
    ]);
    assert_eq!(status, 403, "no origin, from another site");
    let (status, _) = refused(&[
        ("Origin", &origin),
        ("Content-Type", "text/plain"),
        ("Authorization", &bearer),
    ]);
    assert_eq!(status, 415, "not JSON, as a cross-site form would send");
    assert!(
        status_with_host(&console, "evil.example").contains(" 421 "),
        "a rebound name is refused"
    );
    assert_eq!(f.depths().await, (0, 1), "a refused write changed nothing");
    let (status, body) = post(
        &console,
        "replay",
        "rbt.console.no-such-queue",
        &[
            ("Origin", &origin),
            ("Content-Type", "application/json"),
            ("Authorization", &bearer),
        ],
    );
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no consumer with the work queue `rbt.console.no-such-queue`"),
        "{body}"
    );

    // The same request with everything in place goes through.
    let (status, body) = post(
        &console,
        "replay",
        &queue,
        &[
            ("Origin", &origin),
            ("Content-Type", "application/json"),
            ("Authorization", &bearer),
        ],
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["matched"][0]["message_id"], "db-1");
    assert_eq!(f.depths().await, (1, 0));

    // Every response carries the browser's protections, and the page has no
    // inline script for the policy to allow.
    let mut page = agent().get(&console.url).call().unwrap();
    let header = |name: &str| {
        page.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let policy = header("content-security-policy").unwrap_or_default();
    assert!(
        policy.contains("default-src 'self'") && policy.contains("script-src 'self'"),
        "{policy}"
    );
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    assert_eq!(header("x-frame-options").as_deref(), Some("DENY"));
    let html = page.body_mut().read_to_string().unwrap();
    let scripts: Vec<&str> = html
        .split("<script")
        .skip(1)
        .map(|tag| tag.split('>').next().unwrap_or_default())
        .collect();
    assert!(!scripts.is_empty(), "the page loads its script: {html}");
    for tag in scripts {
        assert!(tag.contains(" src="), "an inline script: <script{tag}>");
    }
}

#[tokio::test]
async fn a_read_only_console_refuses_writes_even_with_the_token() {
    let f = Fixture::new("console.read-only", &letters()[..1]).await;
    let console = Console::start(&["--read-only"]);
    let origin = console.origin();
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
        ("Authorization", bearer.as_str()),
    ];
    for action in ["replay", "discard", "purge", "rebuild-index"] {
        let (status, body) = post(&console, action, f.queue(), &headers);
        assert_eq!(status, 403, "{action}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains("read-only"),
            "{body}"
        );
    }
    assert_eq!(
        f.depths().await,
        (0, 1),
        "a read-only console changed the queues"
    );
    let config: Value = agent()
        .get(format!("{}api/config", console.url))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(config["read_only"], true);
    // Reading still works: the message is listed.
    let report: Value = agent()
        .get(format!(
            "{}api/consumers/{}/messages?message_id=db-1",
            console.url,
            f.queue()
        ))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(report["matched"][0]["error"], "database unavailable");
}

#[test]
fn refuses_to_listen_beyond_loopback_without_a_token_set_by_the_operator() {
    let output = Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
        .args(["console", "--listen", "0.0.0.0:0", "--allowed-host", "x:1"])
        .env("AMQP_URL", url())
        .env_remove("RABBIT_BACKOFF_CONSOLE_TOKEN")
        .output()
        .expect("run the console");
    assert!(!output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("without a token set by the operator: set RABBIT_BACKOFF_CONSOLE_TOKEN"),
        "{output:?}"
    );
}

const ALICE: &str = "alice-token-0123456789abcdef";

/// The page is no wider than a 1400 px window.
const FITS: &str = "return document.documentElement.scrollWidth <= window.innerWidth
    ? true : document.documentElement.scrollWidth + ' > ' + window.innerWidth;";

async fn fits(b: &Browser, what: &str) {
    assert_eq!(
        b.eval(FITS).await,
        Value::Bool(true),
        "{what}: wider than the window"
    );
}

/// The messages the page lists: their ids.
const LISTED: &str =
    "return [...document.querySelectorAll('#messages tbody tr')].map(r => r.dataset.messageId)";

/// One browser session over one consumer with a 60 s and a 10 min tier: a
/// 4 KB unbroken error whose row stays inside a 1400 px window; a search in
/// the bodies; two messages selected and replayed behind one confirmation
/// stating the count, the broker's new depths shown at once; every match
/// selected and discarded; the matches exported as JSONL; a message edited
/// and replayed with the original in its history under the token's name;
/// the audit with alice's name; the retry tiers with when each message is due.
#[tokio::test]
async fn the_page_fits_the_window_and_finds_selects_edits_exports_audits_and_lists_tiers() {
    let wide_error = format!("E{}", "x".repeat(4096));
    let mut dead_letters = vec![letter("wide", &wide_error, "exhausted", "{}")];
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
    let f = Fixture::with_delays("console.find", "60s,10m", &dead_letters).await;
    let queue = f.queue().to_owned();
    let tokens = format!("alice:{ALICE},bob:bob-token-0123456789abcdef00");
    let console = Console::start_with(&[], &[("RABBIT_BACKOFF_CONSOLE_TOKENS", &tokens)]);
    let browser = Browser::start().await;
    let b = &browser;
    b.client.set_window_size(1400, 1000).await.unwrap();
    b.client
        .goto(&format!("{}#token={ALICE}", console.url))
        .await
        .expect("open the console");

    // The 4 KB error: its group row, expanded, and its message stay inside
    // the window.
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    let groups = b
        .until(
            "three groups",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 3 ? g : null;"),
        )
        .await;
    let wide = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["reason"] == "exhausted")
        .expect("the wide error's group");
    fits(b, "the groups").await;
    let wide_row = format!(
        "#groups tr[data-group=\"{}\"]",
        wide["id"].as_str().unwrap()
    );
    b.click(&format!("{wide_row} .fingerprint")).await;
    assert_eq!(
        b.eval(&format!(
            "return document.querySelector('{wide_row} .fingerprint').classList.contains('open')"
        ))
        .await,
        true
    );
    fits(b, "the whole error shown").await;
    b.click(&format!("{wide_row} button.messages")).await;
    b.show_message("wide").await;
    assert_eq!(b.text("#message-error").await, wide_error);
    fits(b, "the message").await;

    // A search finds the text anywhere in the body, whatever its case.
    b.click("#search-clear").await;
    b.client
        .find(Locator::Css("#search-text"))
        .await
        .unwrap()
        .send_keys("TENANT-7")
        .await
        .unwrap();
    b.click("#search-go").await;
    let listed = b
        .until(
            "the five matches",
            &format!("return document.getElementById('messages-title').textContent.startsWith('5 message(s)') ? (() => {{ {LISTED} }})() : null"),
        )
        .await;
    assert_eq!(listed, json!(["t7-1", "t7-2", "t7-3", "t7-4", "t7-5"]));
    // The chart: the matches per group over time, drawn as plain SVG.
    let chart = b
        .eval(
            "return { bars: document.querySelectorAll('#chart rect.bar').length,
                      legend: document.querySelectorAll('#chart-legend li').length }",
        )
        .await;
    assert_eq!(
        chart,
        json!({"bars": 5, "legend": 1}),
        "five failures of one group, minutes apart"
    );

    // Two selected, replayed behind one confirmation with the count; the
    // consumer's depths are the broker's as soon as the outcome shows.
    b.click("#messages tr[data-message-id=\"t7-1\"] .pick")
        .await;
    b.click("#messages tr[data-message-id=\"t7-2\"] .pick")
        .await;
    assert_eq!(b.text("#selected-count").await, "2 selected");
    b.click("#replay-selected").await;
    let question = b.confirmation().await;
    assert!(
        question.contains("Replay the 2 selected message(s)") && question.contains(&queue),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    let notice = b
        .until(
            "the replay's outcome",
            "const n = document.getElementById('notice'); return n.hidden ? null : n.textContent;",
        )
        .await;
    assert!(
        notice
            .as_str()
            .unwrap()
            .starts_with("Replayed 2 message(s); 7 left"),
        "{notice}"
    );
    assert!(notice.as_str().unwrap().contains("(by alice)"), "{notice}");
    assert_eq!(f.depths().await, (2, 7), "the broker: work queue, DLQ");
    assert_eq!(
        b.eval(&depths_are(&queue, 2, 7)).await,
        true,
        "the page shows the depths the replay read after it"
    );

    // Every match selected (the page lists 3 now), discarded behind one
    // confirmation with the count.
    b.until(
        "three matches left",
        "return document.getElementById('messages-title').textContent.startsWith('3 message(s)')",
    )
    .await;
    b.click("#select-matching").await;
    b.click("#discard-selected").await;
    let question = b.confirmation().await;
    assert!(
        question.contains("Discard all 3 message(s) that match"),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    b.until("the discard's outcome", "return document.getElementById('notice').textContent.startsWith('Discarded 3 message(s); 4 left')").await;
    assert_eq!(f.depths().await, (2, 4));

    // What matches, exported as `dlq export --jsonl` writes it.
    b.click("#search-clear").await;
    b.client
        .find(Locator::Css("#search-text"))
        .await
        .unwrap()
        .send_keys("tenant-9")
        .await
        .unwrap();
    b.click("#search-go").await;
    b.until(
        "two matches",
        "return document.getElementById('messages-title').textContent.startsWith('2 message(s)')",
    )
    .await;
    let exported = b
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(document.getElementById('export').href).then(r => r.text()).then(done, e => done(String(e)));",
            vec![],
        )
        .await
        .unwrap();
    let records: Vec<Value> = exported
        .as_str()
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(records.len(), 2, "{exported}");
    assert_eq!(records[0]["properties"]["message_id"], "t9-1");
    let record: rabbit_backoff::dead_letters::DeadLetterRecord =
        serde_json::from_value(records[1].clone()).expect("a record `dlq import` reads");
    assert_eq!(
        record.message().unwrap().1,
        b"{\"order\":12,\"tenant\":\"tenant-9\"}"
    );

    // Edited, then replayed: the copy carries the change, its history the
    // original and who did it.
    b.click("#search-clear").await;
    b.client
        .find(Locator::Css("#search-text"))
        .await
        .unwrap()
        .send_keys("sku")
        .await
        .unwrap();
    b.click("#search-go").await;
    b.until(
        "the message to fix",
        "return document.getElementById('messages-title').textContent.startsWith('1 message(s)')",
    )
    .await;
    b.show_message("fix-me").await;
    b.click("#message-edit").await;
    b.until(
        "the whole body to edit",
        "return document.getElementById('edit-body').value === '{\"sku\":\"BAD\"}'",
    )
    .await;
    b.eval(
        "document.getElementById('edit-body').value = '{\"sku\":\"GOOD\"}';
         document.getElementById('edit-headers').value = 'tenant: globex';",
    )
    .await;
    b.click("#edit-submit").await;
    let question = b.confirmation().await;
    assert!(
        question.contains("Replay message fix-me with the edited body and headers"),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    b.until("the edit's outcome", "return document.getElementById('notice').textContent.startsWith('Replayed edited 1 message(s); 3 left')").await;
    let replayed = f.take_from_work_queue().await;
    let edited = replayed
        .iter()
        .find(|(id, _, _)| id == "fix-me")
        .expect("the edited copy in the work queue");
    assert_eq!(edited.1, b"{\"sku\":\"GOOD\"}");
    let headers = &edited.2;
    assert_eq!(
        headers.get("tenant"),
        Some(&AMQPValue::LongString("globex".into()))
    );
    assert_eq!(headers.get("debug"), None, "a header left out is removed");
    let Some(AMQPValue::FieldArray(history)) = headers.get("x-replay-history") else {
        panic!("no history: {headers:?}")
    };
    let Some(AMQPValue::FieldTable(entry)) = history.as_slice().first() else {
        panic!("no history entry")
    };
    let entry = entry.inner();
    assert_eq!(
        entry.get("x-original-body"),
        Some(&AMQPValue::LongString("{\"sku\":\"BAD\"}".into()))
    );
    assert_eq!(
        entry.get("x-replayed-by"),
        Some(&AMQPValue::LongString("alice".into()))
    );
    assert_eq!(
        entry.get("x-error"),
        Some(&AMQPValue::LongString("unknown sku BAD".into()))
    );
    let Some(AMQPValue::FieldTable(original)) = entry.get("x-original-headers") else {
        panic!("no original headers: {entry:?}")
    };
    assert_eq!(
        original.inner().get("tenant"),
        Some(&AMQPValue::LongString("acme".into()))
    );
    assert_eq!(
        original.inner().get("debug"),
        Some(&AMQPValue::LongString("yes".into()))
    );

    // The audit, newest first, with alice's name; and its file.
    let audit = b
        .until(
            "three audit entries",
            "const rows = [...document.querySelectorAll('#audit tbody tr')].map(r => ({
                who: r.querySelector('.who').textContent,
                action: r.querySelector('.action').textContent,
                count: r.querySelector('.count').textContent,
             }));
             return rows.length === 3 ? rows : null;",
        )
        .await;
    assert_eq!(
        audit,
        json!([
            {"who": "alice", "action": "edit", "count": "1"},
            {"who": "alice", "action": "discard", "count": "3"},
            {"who": "alice", "action": "replay", "count": "2"},
        ])
    );
    let file = std::fs::read_to_string(&console.audit).unwrap();
    assert_eq!(file.lines().count(), 3, "{file}");
    let last: Value = serde_json::from_str(file.lines().last().unwrap()).unwrap();
    assert_eq!(last["who"], "alice");
    assert_eq!(last["message_ids"], json!(["fix-me"]));

    // The retry tiers: what waits in each, and when each message is due.
    let now = std::time::SystemTime::now();
    let entered = humantime::format_rfc3339_millis(now - Duration::from_secs(15)).to_string();
    let due_at = humantime::format_rfc3339_millis(now + Duration::from_secs(45)).to_string();
    f.wait_in_tier(60_000, "waiting-1", Some(&entered)).await;
    f.wait_in_tier(60_000, "waiting-2", None).await;
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open-tiers"
    ))
    .await;
    let tier = format!("{queue}.retry_60000ms");
    let due = b
        .until(
            "the tier's two messages",
            &format!(
                "const rows = [...document.querySelectorAll('.tier-listing[data-queue=\"{tier}\"] tbody tr')];
                 return rows.length === 2 ? rows.map(r => ({{
                    id: r.dataset.messageId,
                    due: r.querySelector('.due time')?.getAttribute('datetime'),
                    shown: r.querySelector('.due').textContent,
                    exact: r.querySelector('.due time')?.title,
                 }})) : null;"
            ),
        )
        .await;
    assert_eq!(due[0]["id"], "waiting-1");
    assert_eq!(due[0]["due"], due_at, "entered + 60 s");
    assert!(
        due[0]["exact"].as_str().unwrap().starts_with(&due_at),
        "{due}"
    );
    assert!(
        due[0]["shown"].as_str().unwrap().ends_with(" ago")
            || due[0]["shown"].as_str().unwrap().starts_with("in "),
        "{due}"
    );
    assert_eq!(due[1]["id"], "waiting-2");
    assert_eq!(
        due[1]["shown"], "within 60 s (a first retry is not stamped)",
        "a first retry copy without a max_age carries only its count"
    );
    assert_eq!(
        f.tier_depth(60_000).await,
        2,
        "listing a tier leaves its messages"
    );
    fits(b, "the tiers").await;

    if let Ok(path) = std::env::var("CONSOLE_SCREENSHOT") {
        b.click("#search-clear").await;
        b.until("every dead letter", "return document.getElementById('messages-title').textContent.startsWith('3 message(s)')").await;
        b.show_message("wide").await;
        b.client.set_window_size(1400, 1500).await.unwrap();
        b.eval("window.scrollTo(0, 0)").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Only this test's consumer: the broker may hold other tests' queues.
        b.eval(&format!(
            "for (const r of document.querySelectorAll('#consumers tbody tr')) if (r.dataset.queue !== {queue:?}) r.remove();"
        ))
        .await;
        std::fs::write(&path, b.client.screenshot().await.unwrap()).unwrap();
    }
    browser.close().await;
}

/// What these tests do to a fixture's queues besides what the shared
/// fixture does: take the work queue, put messages in a retry tier, write
/// past the dead-letter index.
trait FixtureQueues {
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
        let depth = channel
            .queue_declare(
                self.spec.names().retry_queue(delay_ms).as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
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

/// A GET of the API with these headers: status and body.
fn get(console: &Console, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
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

#[tokio::test]
async fn api_reads_from_other_sites_are_refused_and_equal_reads_share_one_pass() {
    let many: Vec<DeadLetter> = (0..600)
        .map(|i| letter("many", &format!("order {i} not found"), "permanent", "{}"))
        .collect();
    let f = Fixture::new("console.flight", &many).await;
    let console = Console::start(&[]);
    let groups = format!("api/consumers/{}/groups", f.queue());

    // An <img> or fetch from another site is refused before any pass runs.
    for headers in [
        &[
            ("Origin", "http://evil.example"),
            ("Sec-Fetch-Site", "cross-site"),
        ][..],
        &[("Sec-Fetch-Site", "cross-site")],
        &[("Sec-Fetch-Site", "same-site")],
        &[("Origin", "http://evil.example")],
    ] {
        let (status, body) = get(&console, &groups, headers);
        assert_eq!(status, 403, "{headers:?}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("console's own page"),
            "{body}"
        );
    }
    let (status, body) = get(&console, &groups, &[("Sec-Fetch-Site", "same-origin")]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0]["count"], 600);
    // Read from the dead-letter index, not with a pass, over the stream
    // protocol at the test broker's stream port (RABBITMQ_STREAM_PORT, read
    // by --stream-port); over AMQP with --stream-port 0.
    assert_eq!(body[0]["source"], "index", "{body}");
    assert_eq!(body[0]["index_protocol"], "stream", "{body}");
    let over_amqp = Console::start(&["--stream-port", "0"]);
    let (status, amqp) = get(&over_amqp, &groups, &[]);
    assert_eq!(status, 200, "{amqp}");
    assert_eq!(amqp[0]["index_protocol"], "amqp", "{amqp}");
    assert_eq!(amqp[0]["count"], 600);
    drop(over_amqp);
    let (status, _) = get(&console, "", &[("Sec-Fetch-Site", "cross-site")]);
    assert_eq!(status, 200, "the page itself may be opened from a link");

    // Six equal reads at once share one pass; a later one makes its own.
    let view = format!("api/consumers/{}/dead-letters?limit=5", f.queue());
    let start = std::sync::Arc::new(std::sync::Barrier::new(6));
    let passes: Vec<Value> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let (start, view, console) = (start.clone(), &view, &console);
                scope.spawn(move || {
                    start.wait();
                    let (status, body) = get(console, view, &[]);
                    assert_eq!(status, 200, "{body}");
                    assert_eq!(body["total"], 600);
                    body["pass"].clone()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert!(passes.iter().all(|p| *p == passes[0]), "{passes:?}");
    let (_, later) = get(&console, &view, &[]);
    assert!(
        later["pass"].as_u64() > passes[0].as_u64(),
        "{later} after {passes:?}"
    );
    assert_eq!(f.depths().await, (0, 600), "reads move nothing");
}

/// The texts the line under the groups has shown since the script ran.
const WATCH_SOURCE: &str = "const line = document.getElementById('groups-source');
    window.sources = [line.textContent];
    new MutationObserver(() => window.sources.push(line.textContent))
        .observe(line, { childList: true, characterData: true, subtree: true });
    return true;";

/// The line under the groups says where they were read from and why: from
/// the index; from a pass when the index is out of step (a dead letter
/// published straight to the queue), which heals it, so the next read is
/// from the index again; and a purge from the page, confirmed, leaves the
/// groups read from the index, and is audited.
#[tokio::test]
async fn the_groups_say_whether_they_come_from_the_index_or_a_pass_and_a_purge_is_audited() {
    let f = Fixture::new("console.source", &letters()).await;
    let queue = f.queue().to_owned();
    let console = Console::start(&[]);
    let browser = Browser::start().await;
    let b = &browser;
    b.client
        .goto(&format!("{}#token={TOKEN}", console.url))
        .await
        .expect("open the console");
    b.until("the consumer", &depths_are(&queue, 0, 6)).await;
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    b.until(
        "the groups read from the index",
        "return document.getElementById('groups-source').textContent === 'From the index';",
    )
    .await;
    assert_eq!(
        b.eval("return document.getElementById('groups-source').dataset.source")
            .await,
        "index"
    );

    // A dead letter that reached the queue past the index: the next read
    // is a pass, which says why and leaves a checkpoint.
    b.eval(WATCH_SOURCE).await;
    f.bypass_the_index("stray", "<b>stray</b> not found").await;
    let sources = b
        .until(
            "the groups read with a pass",
            "return window.sources.some(s => s.startsWith('From a pass')) ? window.sources : null;",
        )
        .await;
    let pass = sources
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|s| s.starts_with("From a pass"))
        .unwrap();
    assert!(
        pass.starts_with(
            "From a pass over the queue: index out of step: 6 live entries, 7 messages; \
             checkpoint written at offset "
        ),
        "{pass}"
    );
    b.until(
        "the stray dead letter's group",
        &format!(
            "const g = (() => {{ {GROUPS} }})(); return g.some(r => r.fingerprint === '<b>stray</b> not found');"
        ),
    )
    .await;
    // The next read is from the index, from that checkpoint.
    b.eval(WATCH_SOURCE).await;
    b.click("#search-go").await;
    b.until(
        "the groups read from the index again",
        "return window.sources.length > 1 && window.sources[window.sources.length - 1] === 'From the index';",
    )
    .await;
    let groups = b.eval(GROUPS).await;
    assert_eq!(group(&groups, "database unavailable")["count"], "3");
    assert_eq!(group(&groups, "<b>stray</b> not found")["count"], "1");
    assert_eq!(
        b.eval("return document.querySelectorAll('#groups b, #groups-source *').length")
            .await,
        0,
        "nothing parsed as HTML"
    );

    // A purge from the page, confirmed: the queue is empty, the groups are
    // read from the index, and the audit has it.
    b.click("#purge").await;
    let question = b.confirmation().await;
    assert!(
        question.starts_with(&format!(
            "Purge the dead-letter queue of {queue}: all 7 message(s)"
        )),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    let notice = b
        .until(
            "the purge's notice",
            "const n = document.getElementById('notice'); return n.textContent.startsWith('Purged') ? n.textContent : null;",
        )
        .await;
    assert!(
        notice
            .as_str()
            .unwrap()
            .starts_with(&format!("Purged 7 message(s) from the dead-letter queue of {queue} (by operator). The index: checkpoint written at offset")),
        "{notice}"
    );
    assert_eq!(f.depths().await, (0, 0));
    b.until(
        "no groups, read from the index",
        "return document.querySelectorAll('#groups tbody tr').length === 0
            && document.getElementById('groups-source').textContent === 'From the index';",
    )
    .await;
    let audit = b
        .until(
            "the purge in the audit",
            "const r = [...document.querySelectorAll('#audit tbody tr')].find(r => r.querySelector('.action').textContent === 'purge');
             return r ? { who: r.querySelector('.who').textContent, count: r.querySelector('.count').textContent,
                          outcome: r.querySelector('.outcome').textContent } : null;",
        )
        .await;
    assert_eq!(audit["who"], "operator");
    assert_eq!(audit["count"], "7");
    assert!(
        audit["outcome"]
            .as_str()
            .unwrap()
            .starts_with("done: checkpoint written at offset"),
        "{audit}"
    );
    browser.close().await;
}

/// POSTs `body` (JSON) to `action` of `queue` with these headers.
fn post_json(
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

/// Purge and rebuild of the index: refused without the token or from
/// another site; with it, the queue purged (or the index rebuilt), each
/// audited, and the next groups read from the index.
#[tokio::test]
async fn a_purge_and_a_rebuild_of_the_index_need_the_token_and_are_audited() {
    let f = Fixture::new("console.purge", &letters()).await;
    let queue = f.queue().to_owned();
    let console = Console::start(&[]);
    let origin = console.origin();
    let bearer = format!("Bearer {TOKEN}");
    let json = ("Content-Type", "application/json");
    for action in ["purge", "rebuild-index"] {
        let (status, body) =
            post_json(&console, action, &queue, &[("Origin", &origin), json], "{}");
        assert_eq!(status, 401, "{action} without the token: {body}");
        let (status, body) = post_json(
            &console,
            action,
            &queue,
            &[
                ("Origin", "http://evil.example"),
                json,
                ("Authorization", &bearer),
            ],
            "{}",
        );
        assert_eq!(status, 403, "{action} from another site: {body}");
    }
    let authorized = [
        ("Origin", origin.as_str()),
        json,
        ("Authorization", bearer.as_str()),
    ];
    let (status, body) = post_json(&console, "purge", &queue, &authorized, r#"{"all":1}"#);
    assert_eq!(status, 400, "an unknown field: {body}");
    assert_eq!(f.depths().await, (0, 6), "a refused purge changed nothing");
    let (_, audit) = get(&console, "api/audit", &[]);
    assert_eq!(audit, json!([]), "nothing done, nothing audited");

    // The purge.
    let (status, body) = post_json(&console, "purge", &queue, &authorized, "{}");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["purged"], 6);
    assert_eq!(body["checkpoint"]["kind"], "written", "{body}");
    assert_eq!(body["by"], "operator");
    assert_eq!(f.depths().await, (0, 0));
    let (_, audit) = get(&console, "api/audit", &[]);
    assert_eq!(audit[0]["action"], "purge", "{audit}");
    assert_eq!(audit[0]["who"], "operator");
    assert_eq!(audit[0]["count"], 6);
    assert_eq!(audit[0]["queue"], queue);
    assert_eq!(
        audit[0]["selection"]["dead_letter_queue"],
        f.spec.names().dead_letter_queue
    );
    assert!(
        audit[0]["note"]
            .as_str()
            .unwrap()
            .starts_with("checkpoint written at offset"),
        "{audit}"
    );
    let view = format!("api/consumers/{queue}/dead-letters");
    let (status, after) = get(&console, &view, &[]);
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["groups_source"], "index", "{after}");
    assert_eq!(after["groups"], json!([]));

    // Two dead letters past the index, then a rebuild: a pass that leaves a
    // checkpoint, after which the groups are read from the index.
    f.bypass_the_index("stray-1", "order 1 not found").await;
    f.bypass_the_index("stray-2", "order 2 not found").await;
    let (status, body) = post_json(&console, "rebuild-index", &queue, &authorized, "{}");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["source"], "pass");
    assert_eq!(body["fallback"]["kind"], "rebuild", "{body}");
    assert_eq!(body["checkpoint"]["kind"], "written", "{body}");
    assert_eq!(body["groups"][0]["count"], 2, "{body}");
    assert!(
        body["source_reason"]
            .as_str()
            .unwrap()
            .starts_with("a rebuild of the index was asked for; checkpoint written at offset"),
        "{body}"
    );
    let (_, audit) = get(&console, "api/audit", &[]);
    assert_eq!(audit[0]["action"], "rebuild-index", "{audit}");
    assert_eq!(audit[0]["who"], "operator");
    assert_eq!(audit[0]["count"], 2);
    let (_, after) = get(&console, &view, &[]);
    assert_eq!(after["groups_source"], "index", "{after}");
    assert_eq!(after["groups"][0]["count"], 2, "{after}");
    assert_eq!(after["total"], 2);
    assert_eq!(f.depths().await, (0, 2), "a rebuild moves nothing");

    // A search is grouped by its own pass, and says so.
    let (_, searched) = get(&console, &format!("{view}?text=order"), &[]);
    assert_eq!(searched["groups_source"], "pass", "{searched}");
    assert!(
        searched["groups_source_reason"]
            .as_str()
            .unwrap()
            .contains("search"),
        "{searched}"
    );
}
